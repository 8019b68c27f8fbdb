"""Everything one serving app owns: engine (process or thread), classifier, embedding model, admission, metrics, drain.

Routes reach it as `request.app.state.runtime`. One runtime per app (and per
`ServerMetrics` registry), so tests can build several apps in one process.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace

from contract.distributions import parse_length_distribution
from reference_server.api.admission import AdmissionControl
from reference_server.api.faults import Fault, FaultPlan
from contract.reasoning_effort import parse_effort_tokens
from reference_server.api.errors import APIError
from reference_server.api.settings import ServerConfig
from reference_server.runtime.engine_thread import AsyncEngine
from reference_server.classifier.config import ClassifierConfig
from reference_server.embedding.config import EmbeddingConfig
from reference_server.classifier.batcher import BatchTiming, DynamicBatcher
from reference_server.engine.config import EngineConfig
from reference_server.runtime.engine_process import EngineProcess
from reference_server.runtime.engine_record_log import EngineRecordLog
from reference_server.runtime.engine_threads import engine_threads
from reference_server.runtime.metrics import ServerMetrics
from reference_server.engine.token_space import token_space
from reference_server.engine.tokenizer import ByteTokenizer


class BatchedModelService:
    """A classic model (the classifier, the embedding model): the model, its Triton-style dynamic batcher
    and its own admission queue. `config` has the batcher's settings and `name`."""

    def __init__(self, config, run_batch, metrics: ServerMetrics, retry_after_s: int, **batcher_options) -> None:
        self.config = config
        self.admission = AdmissionControl(max_waiting=config.max_waiting, retry_after_s=retry_after_s)
        self.batcher = DynamicBatcher(
            run_batch, max_batch_size=config.max_batch_size,
            preferred_batch_sizes=config.preferred_batch_sizes, max_queue_delay_s=config.max_queue_delay_s,
            dynamic_batching=config.dynamic_batching, instances=config.instances, on_batch=self._observe_batch,
            **batcher_options)
        self._metrics = metrics

    def _observe_batch(self, rows: int, timings: list[BatchTiming]) -> None:
        self._metrics.triton.batch(self.config.name, rows)
        if isinstance(self.config, ClassifierConfig):
            self._metrics.classifier_batch_size.observe(rows)
            for timing in timings:
                self._metrics.classifier_queue_seconds.observe(timing.queue_s)


def classifier_service(config: ClassifierConfig, metrics: ServerMetrics, retry_after_s: int) -> BatchedModelService:
    from reference_server.classifier.model import TabularClassifier   # torch: only a server with a classifier

    return BatchedModelService(config, TabularClassifier.from_config(config).predict, metrics, retry_after_s)


def embedding_service(config: EmbeddingConfig, metrics: ServerMetrics, retry_after_s: int) -> BatchedModelService:
    """Inputs are token-id arrays of their own lengths: the batch is their list (the model pads it)."""
    from reference_server.embedding.model import TextEncoder   # torch: only a server with the embedding model

    return BatchedModelService(config, TextEncoder(config).embed, metrics, retry_after_s,
                               stack=lambda parts: [ids for part in parts for ids in part])


class ServingRuntime:
    """Args: the three configs; `build_engine` overrides `Engine(engine_config)` (called on
    an engine thread, whatever `server_config.engine_mode` says)."""

    def __init__(self, engine_config: EngineConfig, server_config: ServerConfig,
                 classifier_config: ClassifierConfig, *, build_engine: Callable[[], object] | None = None,
                 embedding_config: EmbeddingConfig | None = None) -> None:
        if engine_config.num_threads is None:   # the default leaves the front end a core (engine_threads)
            engine_config = replace(engine_config, num_threads=engine_threads(server_config.engine_cpus))
        self.engine_config = engine_config
        self.embedding_config = embedding_config or EmbeddingConfig(enabled=False)
        self.server_config = server_config
        self.classifier_config = classifier_config
        self.metrics = ServerMetrics()
        self.admission = AdmissionControl(
            max_waiting=server_config.max_waiting, retry_after_s=server_config.retry_after_s,
            on_waiting_change=self.metrics.requests_admission_waiting.set)
        self.tokenizer = ByteTokenizer()
        self.token_space = token_space(engine_config.model, self.tokenizer)   # the ids a prompt may use
        self.record_log = EngineRecordLog()   # the engine's step and request records (GET /v1/engine/steps)
        self.engine = _engine_client(engine_config, server_config, build_engine, self.metrics, self.record_log)
        self.classifier: BatchedModelService | None = None
        self.embedding: BatchedModelService | None = None
        self.live: dict = {}   # request id -> Generation, for the drain's final abort
        self.created = int(time.time())
        self.draining = False
        self.listening: tuple[str, int] | None = None   # the bound (host, port), once known
        self.kv_sent: dict[str, float] = {}   # prompts sent to a decode worker: request id -> monotonic deadline
        self.faults = FaultPlan(seed=engine_config.seed)   # faults set on purpose (--fault, POST /admin/faults)
        self.http_warm = False                 # set by api.warmup once a streamed request went through
        self.warmup_error: str | None = None   # why that warm-up request failed, if it did
        self.served_model_name = server_config.served_model_name or _default_model_name(engine_config.model)
        self.lora_sources = dict(engine_config.lora_modules)   # adapter name -> its source (a request's `model`)
        self._reasoning_lengths = (parse_length_distribution(server_config.reasoning_tokens, "--reasoning-tokens")
                                   if server_config.reasoning_tokens else None)
        self._reasoning_rng = random.Random(engine_config.seed)
        self.tool_rng = random.Random(engine_config.seed + 1)   # which replies call a tool, which, with what
        self._effort_lengths = parse_effort_tokens(server_config.reasoning_effort_tokens)
        self.grpc_server = None                # KServe V2 over gRPC (--grpc-port), once started
        self.grpc_port: int | None = None      # its bound port

    # --- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        self.engine.start()
        for spec in self.server_config.faults:
            self.set_fault(Fault.parse(spec))
        if self.classifier_config.enabled:
            self.classifier = classifier_service(self.classifier_config, self.metrics,
                                                 self.server_config.retry_after_s)
            self.classifier.batcher.start()
        if self.embedding_config.enabled:
            self.embedding = embedding_service(self.embedding_config, self.metrics, self.server_config.retry_after_s)
            self.embedding.batcher.start()
        if self.server_config.grpc_port is not None:
            from reference_server.api.kserve_grpc import start_grpc_server   # grpcio: only when asked for

            self.grpc_server, self.grpc_port = await start_grpc_server(
                self, self.server_config.host, self.server_config.grpc_port)

    async def stop(self) -> None:
        if self.grpc_server is not None:
            await self.grpc_server.stop(grace=1.0)
        for service in (self.classifier, self.embedding):
            if service is not None:
                await service.batcher.stop()
        await asyncio.to_thread(self.engine.stop)

    async def drain(self, grace_s: float, poll_s: float = 0.05) -> int:
        """Stop admitting (503), let in-flight requests finish for up to `grace_s`, then abort
        the rest. Returns how many were aborted."""
        self.draining = True
        admissions = [self.admission] + [s.admission for s in (self.classifier, self.embedding) if s is not None]
        for admission in admissions:
            admission.draining = True
        deadline = time.monotonic() + grace_s
        while any(a.num_in_flight for a in admissions) and time.monotonic() < deadline:
            await asyncio.sleep(poll_s)
        unfinished = list(self.live.values())
        for generation in unfinished:
            generation.abort_from_server()
        if unfinished:
            await asyncio.sleep(10 * poll_s)   # let their streams send the abort error
        return len(unfinished)

    # --- state -----------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """The engine is warm and so is the HTTP path (`api.warmup`), and not draining."""
        return self.engine.ready.is_set() and self.http_warm and not self.draining

    @property
    def failed(self) -> str | None:
        return self.engine.failed or self.warmup_error

    @property
    def max_model_len(self) -> int:
        return int(self.engine.description.get("max_model_len", 0))

    def check_model(self, model: str | None) -> None:
        """404 for a model this server does not serve; 503 while the engine is still loading."""
        if model is not None and model != self.served_model_name and model not in self.lora_sources:
            adapters = f" and {len(self.lora_sources)} LoRA adapters (GET /v1/models)" if self.lora_sources else ""
            raise APIError(404, f"the model {model!r} does not exist; this server serves "
                                f"{self.served_model_name!r}{adapters}", param="model", code="model_not_found")
        if not self.engine.ready.is_set():
            raise APIError(503, self.failed or "the model is still loading; poll GET /ready",
                           code="not_ready", headers={"Retry-After": str(self.server_config.retry_after_s)})

    def reasons(self, requested: int | None, effort: str | None = None) -> bool:
        """Whether a chat request takes part in reasoning (its usage then counts reasoning tokens, 0 too)."""
        return requested is not None or effort is not None or self._reasoning_lengths is not None

    def reasoning_budget(self, requested: int | None, max_tokens: int, effort: str | None = None) -> int:
        """A chat request's reasoning tokens (`api.reasoning`): its own `reasoning_tokens`, else a draw for its
        `reasoning_effort`, else one from the server's --reasoning-tokens (draws seeded by --seed and capped
        by its max_tokens); 0 = it answers at once."""
        if requested is not None:
            return requested
        lengths = self._reasoning_lengths if effort is None else self._effort_lengths.get(effort)
        if lengths is None:   # no server default, or effort "none"
            return 0
        return min(lengths.sample(self._reasoning_rng), max_tokens)

    def adapter_for(self, model: str | None) -> str | None:
        """The LoRA adapter a request's `model` names (None: the base model); check_model first."""
        return model if model in self.lora_sources else None

    def set_fault(self, fault: Fault) -> dict:
        """Schedule a fault from now (`reference_server.api.faults`); what it is, with its window."""
        scheduled = self.faults.add(fault)
        if fault.kind == "slow":
            self.engine.slow_down(fault.factor, scheduled.start_unix, scheduled.end_unix)
        elif fault.kind == "crash":
            asyncio.get_running_loop().call_later(fault.at_s, _crash)
        return scheduled.describe()

    async def fault_gate(self) -> None:
        """Before a generation request: an error burst answers it now; a stall holds it to the window's end."""
        burst = self.faults.error_now()
        if burst is not None:
            raise APIError(burst.fault.status, f"injected fault: an error burst answers {burst.fault.rate:.0%} of "
                                               f"requests {burst.fault.status} until unix {burst.end_unix:.3f}",
                           code="injected_fault")
        stall = self.faults.active("stall")
        if stall is not None:
            await asyncio.sleep(max(0.0, stall.end_unix - time.time()))   # no end: held until the client leaves
            raise APIError(504, "injected fault: the replica stalled and never answered", code="injected_fault")

    def kv_transfer_sent(self, request_id: str) -> dict:
        """A prefill for a decode worker was answered: until it is read (or the engine's hold times out) its
        blocks are held; where a decode worker finds them (vLLM's remote_host and remote_port)."""
        now = time.monotonic()
        for stale in [r for r, deadline in self.kv_sent.items() if deadline < now]:
            del self.kv_sent[stale]
        self.kv_sent[request_id] = now + self.engine_config.kv_hold_timeout_s
        return self.kv_transfer_address()

    def kv_transfer_address(self) -> dict:
        """Where a decode worker finds this prefill worker's KV (vLLM's remote_host and remote_port): the
        address this server listens on."""
        host, port = self.listening or (self.server_config.host, self.server_config.port)
        return {"remote_host": host, "remote_port": port}

    def describe(self) -> dict:
        """The engine's own description plus the serving limits (what /v1/engine returns)."""
        server = asdict(self.server_config)
        server["api_key"] = server["api_key"] is not None   # never echo the key
        if self.listening is not None:   # the real port when started with --port 0
            server["host"], server["port"] = self.listening
        return {
            **self.engine.description,
            "served_model_name": self.served_model_name,
            "server": server,
            "engine_pid": getattr(self.engine, "pid", os.getpid()),   # the engine process, or this one
            "classifier": asdict(self.classifier_config),
            "embedding": asdict(self.embedding_config),
            "faults": self.faults.describe(),
        }


def _crash() -> None:
    """An injected crash: the process dies at once, as a killed one would (no drain, no cleanup)."""
    print("servecap serve: injected fault: crash", file=sys.stderr, flush=True)
    os._exit(1)


def _engine_client(engine_config: EngineConfig, server_config: ServerConfig,
                   build_engine: Callable[[], object] | None, metrics, record_log: EngineRecordLog):
    """The engine in its own process, or on a thread (always, for a custom `build_engine`:
    a factory closure cannot cross a process boundary)."""
    if build_engine is None and server_config.engine_mode == "process":
        return EngineProcess(engine_config, metrics=metrics, cpus=server_config.engine_cpus, record_log=record_log)
    return AsyncEngine(build_engine or _default_engine_builder(engine_config), metrics=metrics,
                       record_log=record_log)


def _default_engine_builder(engine_config: EngineConfig) -> Callable[[], object]:
    def build():
        from reference_server.engine.engine import Engine   # torch-heavy: import on the engine thread
        return Engine(engine_config)
    return build


def _default_model_name(model: str) -> str:
    """A preset's name, or a checkpoint directory's base name."""
    return os.path.basename(os.path.normpath(model)) if os.sep in model else model
