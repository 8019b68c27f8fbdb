"""Load generation for any OpenAI-compatible serving endpoint.

Locustfiles: `chat.py` (streaming chat/completions), `classify.py` (KServe V2),
`shapes.py` (step/ramp/spike user counts, loaded as a second `-f` file),
`stock_baseline.py` (stock HttpUser, only for the accuracy benchmark's comparison).

Pure modules (no gevent, no locust; unit-tested directly): `records` (the requests.jsonl
contract), `distributions`, `prompts`, `request_bytes`, `arrivals`, `sse`, `exchange`,
`chat_config`, `shape_plans`, `accuracy`, `clock`.

Inside the Locust process: `http_stream` (the timing client), `load_run` (one process's
share of a test), `record_sink` (local file / worker -> master), `scenario_hooks`,
`generator_health`, `greenlet_time`, `locust_report` (one Locust request event per request),
`token_stats`, `token_summary`, `token_tab` (TTFT/TPOT/ITL/E2E outside the request events).

Around a run: `samplers` (NVML or host -> samples.csv), `scraper` (/metrics ->
server_metrics.csv), `sample_cli` (`servecap sample`), `scripted_server`,
`accuracy_bench` and `bench` (benchmarks).

Nothing here imports the rest of servecap: loadgen is pointed at a URL.
"""
