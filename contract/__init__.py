"""The run-directory contract between loadgen (which writes a run) and reports (which reads it).

One owner per part; everything else imports it, nothing re-declares it:

- records.py       the `requests.jsonl` record (`Record`, its fields, TPOT), the crash-safe writer, the reader
- record_schema.py the polars schema the report reads records with, derived from `Record`
- loadgen_meta.py  `requests.meta.json` (load-generator health per level) and the limits that judge it
- run_json.py      run.json's typed sections (`RunInfo`), written by the sweep, read tolerantly
- sections.py      how a section reads itself from JSON and writes itself back (`Section`, frozen `FrozenSection`)
- summary.py       summary.json, typed (`Summary`: the verdict, the validation, the run's notes), built by the
                   report, read back by the gate; level_result.py: one level of it (`LevelResult`, `Distribution`)
- slo.py           the SLO and the one rule for "a level meets the SLO" (sweep --auto and the verdict)
- distributions.py the token-length syntax (`--prompt-tokens`) and its sampling, one at a time or many at once
- arrivals.py      the arrival syntax (`--arrival`), its schedules and its gaps' cv²
- checks.py        the number checks (positive integer, ...) and the one wording of each error

Pure: no torch, gevent or locust (numpy; polars only in record_schema.py).
"""
