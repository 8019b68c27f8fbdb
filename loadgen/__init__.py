"""Load generation for any OpenAI-compatible serving endpoint.

Locustfiles: `chat.py` (streaming chat/completions), `classify.py` (KServe V2),
`shapes.py` (step/ramp/spike user-count shapes, used as a second `-f` file).

Pure modules (no gevent, no locust; unit-tested directly): `records`,
`distributions`, `prompts`, `request_bytes`, `arrivals`, `sse`, `exchange`,
`chat_config`, `shape_plans`.

Nothing here imports the rest of servecap: loadgen is pointed at a URL.
"""
