"""`python -m reference_server.engine_bench`: the same as `servecap bench`."""

from reference_server.engine_bench.run import main

if __name__ == "__main__":
    raise SystemExit(main())
