"""The engine's own record of its steps and requests: the route the server serves it on and the
run directory's files the sweep polls it into (one owner for both shapes).

    GET /v1/engine/steps?after=SEQ&limit=N      GET /v1/engine/requests?after=SEQ&limit=N
    -> {"columns": [...], "rows": [[...], ...],  every row starts with its `seq` (1, 2, ... per stream)
        "next": SEQ of the last row (poll again with after=next),
        "first": oldest SEQ still held (the server keeps a bounded ring; rows before it are gone),
        "dropped": rows after `after` that the ring no longer holds}

    engine_steps.csv     source, seq, then StepRecord's fields     (one row per engine step)
    engine_requests.csv  source, seq, then RequestRecord's fields  (one row per finished request)

`source` is the sweep's server key (the strategy, or "url"): a sweep over several strategies
appends every server's rows to one file, as it does for samples.csv. Times are unix seconds on
the server's clock (the same machine's clock as the records' `t_start` in a local run), so a
record joins its engine request by `response_id`, and client minus engine times is what the
front end, the network and the load generator add.

Pure: dataclasses only (the engine, the sweep's poller and the report all import it).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields

STEPS_ROUTE = "/v1/engine/steps"
REQUESTS_ROUTE = "/v1/engine/requests"
STEPS_FILE = "engine_steps.csv"
REQUESTS_FILE = "engine_requests.csv"
MAX_ROWS_PER_POLL = 5000


@dataclass(slots=True)
class StepRecord:
    """One engine step that ran work (schedule, forward, postprocess)."""

    t_start: float           # unix s when the step began
    step_s: float            # its wall time
    batch: int               # sequences in the step
    prefill_tokens: int      # prompt (or recomputed) tokens computed this step
    decode_seqs: int         # sequences computing exactly their next token
    context_tokens: int      # sum over the batch of tokens attended after the step (KV read)
    running: int             # sequences running after the step
    waiting: int             # sequences queued after the step
    kv_blocks_used: int
    preempted: int           # sequences preempted while scheduling this step
    idle_after: bool         # the engine had nothing runnable right after: the next step's start
                             # follows a wait, not this step
    proposal_tokens: int = 0  # speculative decoding: proposals verified this step
    accepted_tokens: int = 0  # of them, the ones kept (the step's tokens out: decodes + these)
    lora_adapters: int = 0    # distinct LoRA adapters in the step
    lora_tokens: int = 0      # tokens of sequences with an adapter
    lora_loads: int = 0       # of them, the ones copied into a slot for this step (cold)
    lora_load_s: float = 0.0  # the time those copies took, inside step_s


@dataclass(slots=True)
class RequestRecord:
    """One request as the engine saw it, written when it finishes (aborted ones are not)."""

    response_id: str         # the engine's request id: the `id` of the HTTP response
    prompt_tokens: int
    output_tokens: int
    t_arrival: float         # unix s: the engine took it
    t_scheduled: float       # first step that computed any of it began
    t_first_token: float     # end of the step that produced its first token
    t_finish: float          # end of the step that produced its last token
    preemptions: int
    cached_tokens: int       # prompt tokens served from the prefix cache
    finish_reason: str
    lora: str = ""           # the LoRA adapter it ran with ("" the base model)
    lora_wait_s: float = 0.0  # queue time passed over because its adapter had no free slot
    kv_transfer_s: float = 0.0  # disaggregated decode: its blocks' allocation to its first step (the KV's arrival)


STEP_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StepRecord))
# the fields added after runs were first written, with what a file from before them stands for
STEP_FIELDS_ADDED: dict[str, int] = {f.name: f.default for f in fields(StepRecord) if f.default is not MISSING}
REQUEST_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord))
REQUEST_FIELDS_ADDED: dict[str, object] = {f.name: f.default for f in fields(RequestRecord) if f.default is not MISSING}
STEP_COLUMNS: tuple[str, ...] = ("source", "seq", *STEP_FIELDS)
REQUEST_COLUMNS: tuple[str, ...] = ("source", "seq", *REQUEST_FIELDS)


def as_row(record: StepRecord | RequestRecord) -> list:
    """The record's fields in declaration order (the route's row after its seq)."""
    return [getattr(record, name) for name in record.__slots__]
