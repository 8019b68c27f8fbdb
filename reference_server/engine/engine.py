"""The engine: requests in, tokens out. `step()` = schedule -> run -> postprocess.

Single-threaded by contract: only one thread ever calls it (`engine_loop.EngineLoop`, in the
engine process or on the engine thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict

from engine_core.architecture import ModelArchitecture
from engine_core.models import get_model
from reference_server.engine.config import DTYPE_BYTES, EngineConfig
from reference_server.engine.disaggregation import RECEIVE, SEND, Disaggregation, SentPrompts
from reference_server.engine.outputs import EngineStats, RequestRejected, StepOutput
from reference_server.engine.speculation_counts import SpeculationCounts, describe_speculation
from reference_server.engine.step_recorder import StepRecorder
from reference_server.engine.token_space import token_space
from reference_server.engine.tokenizer import ByteTokenizer
from engine_core.scheduling.batch_shape import batch_shape
from engine_core.scheduling.block_manager import BlockManager, cdiv
from engine_core.scheduling.postprocess import StopRule, postprocess
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.speculative import AcceptanceDraws, DraftSlots, NgramProposer
from engine_core.scheduling.strategies import make_scheduler
from engine_core.scheduling.strategies.base import ScheduledBatch

DEFAULT_TOKENS_PER_SEQ = 512   # default cache: room for limits.max_running sequences of this many tokens


def busy_wait(seconds: float) -> None:
    """Spin until this thread has used `seconds` more CPU time: a fault that costs what extra compute
    would. Counted in CPU time, not wall time, so that it stays the same fault when the core is shared
    (a duet compare runs two engines on one core: a wall-clock spin would shrink to half its work there)."""
    deadline = time.thread_time() + seconds
    while time.thread_time() < deadline:
        pass


def resolve_model(model: str) -> tuple[ModelArchitecture, dict | None]:
    """A local checkpoint directory (architecture + weights) or a catalog preset (random weights)."""
    from reference_server.engine.checkpoint import is_checkpoint_dir, load_checkpoint   # torch

    if is_checkpoint_dir(model):
        return load_checkpoint(model)
    try:
        return get_model(model), None
    except ValueError as exc:
        raise ValueError(f"model: {exc} (or give a local checkpoint directory with config.json)") from None


class Engine:
    def __init__(self, config: EngineConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.tokenizer = ByteTokenizer()
        self.token_space = token_space(config.model, self.tokenizer)   # ids prompts use and sampling covers
        self.lora_slots = None   # LoraSlots with --enable-lora (not on an emulated GPU)
        if config.emulated:
            self._init_emulated()
            return
        from reference_server.engine.model_runner import ModelRunner, kv_block_bytes   # torch: the real path only
        from reference_server.engine.sampler import Sampler

        self.gpu = None
        self.disaggregation = None   # disaggregated prefill/decode is emulated only
        arch, state_dict = resolve_model(config.model)
        if arch.vocab_size < self.token_space.vocab_size:
            raise ValueError(f"model: vocab_size {arch.vocab_size} is smaller than the {self.token_space.source}'s "
                             f"{self.token_space.vocab_size}")
        self.arch = arch
        self.max_model_len = config.max_model_len or arch.max_position_embeddings
        if self.max_model_len > arch.max_position_embeddings:
            raise ValueError(f"max_model_len {self.max_model_len} exceeds the model's "
                             f"max_position_embeddings ({arch.max_position_embeddings})")
        self.kv_block_bytes = kv_block_bytes(arch, config.dtype, config.block_size)
        self.num_kv_blocks = self._num_kv_blocks()
        self.block_manager = BlockManager(self.num_kv_blocks, config.block_size)
        self.scheduler = make_scheduler(config.limits, self.block_manager)
        self.stop_rule = StopRule(eos_id=self.token_space.eos_id, max_model_len=self.max_model_len)
        self.sampler = Sampler(config.seed, self.token_space.eos_id)
        acceptance = None if config.speculative_acceptance is None else \
            AcceptanceDraws(config.speculative_acceptance, config.seed)
        self.runner = ModelRunner(arch, config, num_blocks=self.num_kv_blocks, max_model_len=self.max_model_len,
                                  sampler=self.sampler, state_dict=state_dict,
                                  usable_vocab=self.token_space.vocab_size, acceptance=acceptance)
        if config.enable_lora:
            self._init_lora(arch)
        self.draft = None
        if config.speculative_method == "ngram":
            self.scheduler.proposer = NgramProposer(config.num_speculative_tokens, config.prompt_lookup_max,
                                                    config.prompt_lookup_min)
        elif config.speculative_method == "draft":
            self.scheduler.proposer = DraftSlots(config.num_speculative_tokens)
            self.draft = self._draft_runner(arch)
        self._init_state()

    def _init_lora(self, arch: ModelArchitecture) -> None:
        """Adapters into host memory, the model's linear layers wrapped with `max_loras` slots, and the
        scheduler's admission rule on the same slots."""
        from reference_server.engine.lora import LoraBank, load_adapters
        from engine_core.scheduling.lora_slots import LoraSlots

        cfg = self.config
        adapters = load_adapters(cfg.lora_modules, arch, cfg.max_lora_rank, cfg.seed, self.runner.dtype)
        self.lora_slots = LoraSlots(cfg.max_loras)
        self.scheduler.lora_slots = self.lora_slots
        self.runner.lora = LoraBank(self.runner.model, adapters, self.lora_slots, cfg.max_lora_rank)

    def _draft_runner(self, target: ModelArchitecture):
        """The draft model, which must share the target's tokenizer and reach its context length."""
        from reference_server.engine.draft_runner import DraftRunner

        try:
            arch, state_dict = resolve_model(self.config.speculative_model)
        except ValueError as exc:
            raise ValueError(f"speculative_model: {str(exc).removeprefix('model: ')}") from None
        if arch.vocab_size != target.vocab_size:
            raise ValueError(f"speculative_model: vocab_size {arch.vocab_size} differs from the target's "
                             f"{target.vocab_size}: the draft must share the tokenizer")
        if arch.max_position_embeddings < self.max_model_len:
            raise ValueError(f"speculative_model: max_position_embeddings {arch.max_position_embeddings} is shorter "
                             f"than max_model_len {self.max_model_len}")
        return DraftRunner(arch, self.config, num_blocks=self.num_kv_blocks, max_model_len=self.max_model_len,
                           state_dict=state_dict, usable_vocab=self.token_space.vocab_size)

    def _init_emulated(self) -> None:
        """An emulated GPU (`config.emulate`): the architecture only (no weights), the KV cache and limits its
        engine would size on that GPU (calculators.gpu_engine), and the step model's wait for a forward pass."""
        from calculators.gpu_engine import gpu_engine
        from calculators.moe_layout import MoeLayout
        from engine_core.gpus import get_gpu
        from engine_core.models import resolve_model as resolve_architecture
        from reference_server.engine.emulated_runner import EmulatedRunner, EmulatedTokens

        cfg = self.config
        arch = resolve_architecture(cfg.model)
        if arch.vocab_size < self.token_space.vocab_size:
            raise ValueError(f"model: vocab_size {arch.vocab_size} is smaller than the {self.token_space.source}'s "
                             f"{self.token_space.vocab_size}")
        limits = cfg.limits
        step_tokens = getattr(limits, "max_num_batched_tokens", None)
        self.gpu = gpu_engine(arch, get_gpu(cfg.emulate), dtype=cfg.dtype, tp=cfg.tp,
                              gpu_memory_utilization=cfg.gpu_memory_utilization, engine=cfg.emulate_engine,
                              max_model_len=cfg.max_model_len, max_num_seqs=limits.max_running // cfg.dp,
                              max_num_batched_tokens=None if step_tokens is None else step_tokens // cfg.dp,
                              layout=MoeLayout(cfg.dp, cfg.expert_parallel))   # the limits are a rank's there
        if self.gpu.block_size != cfg.block_size:
            raise ValueError(f"block_size {cfg.block_size}: {cfg.emulate_engine} on {cfg.emulate} uses "
                             f"{self.gpu.block_size}-token blocks")
        self.arch = arch
        self.max_model_len = self.gpu.max_model_len
        self.kv_block_bytes = self.gpu.fit.kv_block_bytes
        self.num_kv_blocks = self.gpu.num_kv_blocks
        self.block_manager = BlockManager(self.num_kv_blocks, cfg.block_size)
        self.scheduler = make_scheduler(limits, self.block_manager)
        self.stop_rule = StopRule(eos_id=self.token_space.eos_id, max_model_len=self.max_model_len)
        space = self.token_space
        self.sampler = EmulatedTokens(cfg.seed, [i for i in self.tokenizer.text_ids()
                                                 if i < space.vocab_size and i != space.eos_id])
        self.draft = None
        speculative = None
        if cfg.speculative_method is not None:   # emulated acceptance: the draws decide, the step model times it
            from calculators.sim.speculative_step import SpeculativeStep, draft_step_model

            self.scheduler.proposer = DraftSlots(cfg.num_speculative_tokens)
            draft = None if cfg.speculative_method != "draft" else draft_step_model(
                resolve_architecture(cfg.speculative_model), get_gpu(cfg.emulate), dtype=cfg.dtype, tp=cfg.tp,
                engine=cfg.emulate_engine)
            speculative = SpeculativeStep(cfg.num_speculative_tokens, cfg.speculative_acceptance, draft)
        self.runner = EmulatedRunner(self.gpu.step_model, self.sampler, seed=cfg.seed, jitter_cv=cfg.step_jitter_cv,
                                     speculative=speculative)
        self.disaggregation = self._disaggregation(get_gpu(cfg.emulate))
        self._init_state()

    def _disaggregation(self, gpu) -> Disaggregation:
        """This emulated worker's KV-transfer side: its role and link (--kv-transfer-gbs, else the GPU's
        interconnect; a GPU without one needs the flag)."""
        cfg = self.config
        link = cfg.kv_transfer_gbs * 1e9 if cfg.kv_transfer_gbs is not None else gpu.interconnect_bytes_per_s
        if link is None:
            if cfg.role == "both":
                link = float("inf")   # nothing is ever received without a role's request: never used
            else:
                raise ValueError(f"kv_transfer_gbs: {gpu.name} has no interconnect in the catalog; give the link")
        return Disaggregation(cfg.role, link, cfg.kv_transfer_latency_s, tp=cfg.tp)

    def _init_state(self) -> None:
        self._seqs: dict[str, Sequence] = {}
        self._slowdowns: list[tuple[float, float, float]] = []   # faults: (factor, start unix, end unix)
        self._sent = SentPrompts(self.block_manager)   # a prefill worker's sent prompts, held until read
        self._last_batch_size = 0
        self._last_num_tokens = 0
        self._last_step_s = 0.0
        self._total_steps = 0
        self._gpu_free_at: float | None = None   # an emulated GPU's last step end, while work waits (perf_counter)
        self.recorder = StepRecorder()
        self.speculation = SpeculationCounts(self.config.num_speculative_tokens)

    def emulation(self) -> dict:
        """What an emulated engine stands in for (the /v1/engine `emulation` block)."""
        gpu = self.gpu
        return {"emulated": True, "description": gpu.describe(), "gpu": gpu.gpu, "engine": gpu.engine,
                "tp": gpu.tp, "dp": gpu.dp, "expert_parallel": gpu.expert_parallel, "kv_dtype": gpu.kv_dtype, "gpu_memory_utilization": gpu.fit.gpu_memory_utilization,
                "step_jitter_cv": self.config.step_jitter_cv, "step_model": asdict(gpu.step_model),
                "note": "no forward pass runs: each step waits the time this GPU would take for its batch "
                        "(roofline under the efficiency profile fitted on published measurements)"}

    def _num_kv_blocks(self) -> int:
        cfg = self.config
        if cfg.kv_blocks is not None:
            return cfg.kv_blocks
        if cfg.kv_memory_bytes is not None:
            blocks = cfg.kv_memory_bytes // self.kv_block_bytes
            if blocks < 1:
                raise ValueError(f"kv_memory_bytes {cfg.kv_memory_bytes} is less than one KV block "
                                 f"({self.kv_block_bytes} bytes)")
            return blocks
        per_seq = cdiv(min(DEFAULT_TOKENS_PER_SEQ, self.max_model_len), cfg.block_size)
        return max(cfg.limits.max_running * per_seq, cdiv(self.max_model_len, cfg.block_size))

    # -- requests --------------------------------------------------------------------------
    def add_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams, *,
                    submitted_at: float | None = None, lora: str | None = None) -> None:
        """Queue a request; RequestRejected says why one can never be served. `submitted_at` (unix s):
        when the serving process handed it over, the arrival in the engine's record (default: now).
        `lora`: the adapter it runs with (None: the base model)."""
        if request_id in self._seqs:
            raise RequestRejected(f"request id {request_id!r} is already in use")
        if lora is not None and (self.lora_slots is None or lora not in self.runner.lora.adapters):
            raise RequestRejected(f"LoRA adapter {lora!r} is not served here" + (
                "" if self.lora_slots is not None else " (the engine runs without --enable-lora)"))
        ids = list(prompt_token_ids)
        if not ids:
            raise RequestRejected("prompt is empty: at least one token is needed")
        bad = [t for t in ids if isinstance(t, bool) or not isinstance(t, int)
               or not 0 <= t < self.token_space.vocab_size]
        if bad:
            raise RequestRejected(f"prompt token ids must be integers in [0, {self.token_space.vocab_size}), "
                                  f"got {bad[0]!r}")
        total = len(ids) + params.max_tokens
        if total > self.max_model_len:
            raise RequestRejected(f"prompt ({len(ids)} tokens) + max_tokens ({params.max_tokens}) = {total} "
                                  f"exceeds the maximum context length {self.max_model_len}")
        blocks = cdiv(total, self.config.block_size)
        if blocks > self.num_kv_blocks:
            raise RequestRejected(f"prompt + max_tokens needs {blocks} KV blocks but the whole cache holds "
                                  f"{self.num_kv_blocks} ({self.config.block_size} tokens each)")
        seq = Sequence(request_id, ids, params, arrival_time=self.clock(), lora=lora)
        if params.kv_transfer is not None:
            self._check_kv_transfer(params.kv_transfer)
            if params.kv_transfer == RECEIVE:
                seq.kv_transfer_s = self.disaggregation.transfer_s(len(ids), self.kv_block_bytes / self.config.block_size)
        self._seqs[request_id] = seq
        self.scheduler.add(seq)
        self.recorder.request_added(request_id, time.time() if submitted_at is None else submitted_at)

    def slow_down(self, factor: float, start_unix: float, end_unix: float) -> None:
        """A fault (`reference_server.api.faults`): a step starting in the window lasts `factor` times its time
        (the emulated GPU waits the rest, the real engine spins it, as extra compute would)."""
        self._slowdowns.append((factor, start_unix, end_unix))

    def _slowed(self, t_start: float, step_s: float) -> float:
        """The extra time a slow window adds to this step, spent now (0 outside any)."""
        factor = max((f for f, start, end in self._slowdowns if start <= t_start < end), default=1.0)
        if factor <= 1.0:
            return 0.0
        extra = (factor - 1.0) * step_s
        if self.gpu is not None:
            time.sleep(extra)
        else:
            busy_wait(extra)
        return extra

    def _check_kv_transfer(self, kind: str) -> None:
        if self.disaggregation is None:
            raise RequestRejected("kv_transfer_params: disaggregated prefill and decode run on emulated workers "
                                  "only (servecap serve --emulate GPU --role prefill|decode)")
        refused = self.disaggregation.accepts(kind)
        if refused is not None:
            raise RequestRejected(refused)
        if kind == RECEIVE and self.config.strategy != "continuous":
            raise RequestRejected(f"kv_transfer_params: a received prompt is decoded with continuous batching, "
                                  f"not {self.config.strategy}")

    def abort_request(self, request_id: str) -> None:
        """Forget the request and free its KV blocks now; unknown or finished ids are ignored, but a sent
        prompt's held blocks are released (the decode worker has read them)."""
        if self._sent.release(request_id):
            return
        if request_id in self._seqs:
            self.scheduler.abort(request_id)
            self._forget(request_id)
            self.recorder.request_dropped(request_id)

    def _forget(self, request_id: str) -> None:
        self._seqs.pop(request_id, None)
        self.sampler.forget(request_id)
        if self.draft is not None:
            self.draft.forget(request_id)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def seconds_until_schedulable(self) -> float | None:
        return self.scheduler.seconds_until_schedulable(self.clock())

    # -- the loop --------------------------------------------------------------------------
    def step(self) -> list[StepOutput]:
        t_start, start = time.time(), time.perf_counter()
        now = self.clock()
        if self._sent:
            self._sent.expire(now)
        batch = self.scheduler.schedule(now)
        if batch is None:
            self._gpu_free_at = None
            return []
        if self._gpu_free_at is not None:
            # An emulated GPU's step runs from when the previous one ended, when work was already waiting:
            # on a GPU server the host hands off one step's outputs and prepares the next while the GPU
            # runs, so the engine loop's hand-off lies inside the step's time instead of adding to it.
            t_start, start = t_start - (start - self._gpu_free_at), self._gpu_free_at
        for seq in batch.seqs:
            seq.mark_scheduled(now)
        shape = batch_shape(batch)   # before postprocess advances the batch
        if self.config.inject_step_delay_ms:
            busy_wait(self.config.inject_step_delay_ms / 1e3)
        if self.draft is not None:
            self.draft.propose(batch)
        tokens = self.runner.run(batch, shape, start) if self.gpu is not None else self.runner.run(batch)
        # a prefill for a decode worker answers with its blocks, which finishing frees
        sending = {seq.request_id: list(seq.block_table) for seq in batch.seqs if seq.params.kv_transfer == SEND}
        injected = self._slowed(t_start, time.perf_counter() - start) if self._slowdowns else 0.0
        outputs = self._postprocess(batch, tokens, sending)
        for output in outputs:   # its blocks wait for the decode worker's read
            if output.kv_transfer_params is not None:
                self._sent.hold(output.request_id, sending[output.request_id],
                                self.clock() + self.config.kv_hold_timeout_s)
        self._last_batch_size = len(batch)
        self._last_num_tokens = batch.num_tokens
        self._last_step_s = time.perf_counter() - start
        self._total_steps += 1
        scheduler = self.scheduler
        idle_after = scheduler.seconds_until_schedulable(self.clock()) != 0.0
        if self.gpu is not None:
            self.runner.settle(self._last_step_s - injected)   # the fault's extra is no wait to correct
            self._gpu_free_at = None if idle_after else start + self._last_step_s
        self.recorder.stepped(t_start, self._last_step_s, shape, batch, outputs, running=len(scheduler.running),
                              waiting=len(scheduler.waiting), kv_blocks_used=self.block_manager.num_used_blocks,
                              idle_after=idle_after, accepted_tokens=self._step_accepted,
                              lora_loads=0 if self.lora_slots is None else len(self.runner.lora.last_loaded),
                              lora_load_s=0.0 if self.lora_slots is None else self.runner.lora.last_load_s)
        return outputs

    def _postprocess(self, batch: ScheduledBatch, tokens: list[int | list[int] | None],
                     sending: dict[str, list[int]]) -> list[StepOutput]:
        self._step_accepted = self.speculation.count(batch, tokens)
        outputs = []
        now = self.clock()
        for seq, token, reason in postprocess(self.scheduler, batch, tokens, self.stop_rule):
            seq.mark_token(now)
            if reason is not None:
                self._forget(seq.request_id)
            if outputs and outputs[-1].request_id == seq.request_id:   # a verification step's next kept token
                outputs[-1].new_token_ids.append(token)
                outputs[-1].finished, outputs[-1].finish_reason = reason is not None, reason
                outputs[-1].num_output_tokens = seq.num_output_tokens
                outputs[-1].timings = seq.timings() if reason is not None else None
                continue
            outputs.append(StepOutput(
                request_id=seq.request_id, new_token_ids=[token], finished=reason is not None,
                finish_reason=reason, num_prompt_tokens=seq.num_prompt_tokens,
                num_output_tokens=seq.num_output_tokens,
                num_cached_prompt_tokens=min(seq.num_cached_tokens, seq.num_prompt_tokens),
                timings=seq.timings() if reason is not None else None,
                kv_transfer_params=(self.disaggregation.sent(seq.request_id, sending[seq.request_id])
                                    if reason is not None and seq.request_id in sending else None),
            ))
        return outputs

    def warmup(self) -> None:
        """One real forward pass (a throwaway request), so the first user does not pay for it."""
        request_id = "__warmup__"
        self.add_request(request_id, [self.tokenizer.bos_id] * min(8, self.max_model_len - 1),
                         SamplingParams(max_tokens=1, temperature=0.0))
        while request_id in self._seqs:
            if not self.step():
                time.sleep(self.seconds_until_schedulable() or 0.0)
        self._total_steps = 0   # counters describe user traffic only
        self.speculation.reset()
        self.recorder.reset()
        self.block_manager.prefix_cache_query_tokens = self.block_manager.prefix_cache_hit_tokens = 0

    # -- introspection ------------------------------------------------------------------------
    def stats(self) -> EngineStats:
        bm = self.block_manager
        return EngineStats(
            num_running=len(self.scheduler.running), num_waiting=len(self.scheduler.waiting),
            kv_blocks_used=bm.num_used_blocks, kv_blocks_total=bm.num_blocks,
            last_batch_size=self._last_batch_size, last_step_s=self._last_step_s,
            last_forward_s=self.runner.last_forward_s,
            total_prefix_cache_hit_tokens=bm.prefix_cache_hit_tokens,
            total_prefix_cache_queries=bm.prefix_cache_query_tokens,
            total_preemptions=self.scheduler.num_preemptions, total_steps=self._total_steps,
            last_num_tokens=self._last_num_tokens, records=self.recorder.take(),
            spec_drafts=self.speculation.drafts, spec_draft_tokens=self.speculation.draft_tokens,
            spec_accepted_tokens=self.speculation.accepted_tokens,
            spec_accepted_per_position=tuple(self.speculation.accepted_per_position),
            lora_running=self._adapters_of(self.scheduler.running),
            lora_waiting=self._adapters_of(self.scheduler.waiting),
        )

    def _adapters_of(self, seqs) -> tuple[str, ...]:
        if self.lora_slots is None:
            return ()
        return tuple(sorted({seq.lora for seq in seqs if seq.lora is not None}))

    def describe(self) -> dict:
        cfg = self.config
        return {
            "model": self.arch.name, "architecture": asdict(self.arch), "dtype": cfg.dtype,
            "dtype_bytes": DTYPE_BYTES[cfg.dtype] if self.gpu is None else _dtype_bytes(cfg.dtype),
            "device": cfg.device if self.gpu is None else self.gpu.describe(), "strategy": cfg.strategy,
            "emulation": None if self.gpu is None else self.emulation(),
            "strategy_limits": cfg.limits.describe(), "block_size": cfg.block_size,
            "num_kv_blocks": self.num_kv_blocks,
            "kv_block_bytes": self.kv_block_bytes,
            "kv_cache_bytes": self.runner.kv_cache_bytes if self.gpu is None else self.num_kv_blocks * self.kv_block_bytes,
            "max_model_len": self.max_model_len, "inject_step_delay_ms": cfg.inject_step_delay_ms,
            "stream_interval": cfg.stream_interval,
            "speculative": describe_speculation(self.config, None if self.draft is None else self.draft.kv_cache_bytes,
                                                emulated=self.gpu is not None),
            "quantization": cfg.quantization,
            "lora": None if self.lora_slots is None else self.runner.lora.describe(),
            "weight_bytes": self.runner.weight_bytes if self.gpu is None else self.gpu.fit.weight_bytes,
            "num_threads": self.runner.num_threads if self.gpu is None else None,
            "seed": cfg.seed, "tokenizer": {"kind": "byte", "vocab_size": self.tokenizer.vocab_size},
            "token_space": self.token_space.describe(),
            "disaggregation": None if self.disaggregation is None else self.disaggregation.describe(),
        }


def _dtype_bytes(name: str) -> float:
    from engine_core.dtypes import parse_dtype

    return parse_dtype(name).bytes_per_element
