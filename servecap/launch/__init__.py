"""Starting servers: the one launcher the sweep, the tests and the benchmarks share. Free of torch.

    ready_line   the reference server's "ready on URL" line (the server writes it, the launcher reads it)
    serve_flags  `servecap serve` flags <-> values, through the server's own parser
    spec         ReferenceServerSpec: a typed launch spec (placement, threads, options) that renders argv
    command      CommandSpec: any server command with `{port}`, ready when GET ready_path answers 200
    process      ServerProcess: start a spec, wait until ready, drain on exit; ServerStartError
"""
