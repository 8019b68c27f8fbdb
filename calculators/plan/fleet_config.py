"""What a simulated fleet is: its replica, router, size and autoscaler, the faults given to it, and the
policies it runs (retries, breakers, hedging); checked when built, run by calculators.plan.fleet."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from contract.hedging import parse_hedge
from contract.model_mix import ModelMix
from calculators.plan.autoscaler import AutoscalerConfig
from calculators.plan.fallback_rule import FallbackRule
from calculators.plan.disaggregated import check_disaggregated
from calculators.plan.resilience import ReplicaErrors, RouterResilience
from calculators.plan.topology import KvLink, Topology
from calculators.sim.front_end import FrontEndByLoad
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer


@dataclass(frozen=True)
class ReplicaSpec:
    """What one replica is: its engine's limits and KV cache, its step-time model, and what it costs."""

    server: SimServer
    step_model: StepTimeModel
    num_kv_blocks: int
    gpus: int = 1                      # GPUs a replica holds (its TP degree)
    hourly_usd_per_gpu: float | None = None
    describe: str = ""
    front_end: FrontEndByLoad | None = None   # delays outside the engine's clock, measured on a host; None: none
    max_model_len: int | None = None   # a request whose prompt and max_tokens exceed it is answered 400 (None: any)


@dataclass(frozen=True)
class Fault:
    """Lose a replica at `t_s`: `replica` (its id) or, when None, the one holding the most requests."""

    t_s: float
    replica: int | None = None


@dataclass(frozen=True)
class FleetConfig:
    replica: ReplicaSpec
    router: str = "round_robin"
    initial_replicas: int = 1
    cold_start_s: float = 60.0
    autoscaler: AutoscalerConfig | None = None   # None: a fixed fleet of initial_replicas
    faults: tuple[Fault, ...] = ()
    retry_lost: bool = False                     # a killed replica's requests are sent again (else they fail)
    seed: int = 0
    router_options: dict = field(default_factory=dict)
    model_mix: ModelMix | None = None            # each request's LoRA adapter (the replica's server.lora prices it)
    disaggregated: Topology | None = None        # fixed prefill and decode pools behind a PD router (`PpDd`)
    kv: KvLink | None = None                     # with `disaggregated`: the prompt's KV from prefill to decode
    pd_hop_s: float = 0.0                        # with `disaggregated`: the router's two exchanges between them
    resilience: RouterResilience = field(default_factory=RouterResilience)   # the router's retries and breakers
    replica_errors: tuple[ReplicaErrors, ...] = ()   # error bursts given to replicas on purpose
    hedge_after: str | None = None               # hedged requests: a delay or a running percentile (contract.hedging)
    fallback: FallbackRule | None = None         # requests that leave for a fallback tier (calculators.plan.fallback)

    def __post_init__(self) -> None:
        if self.disaggregated is not None:
            check_disaggregated(self)
            if self.replica.front_end is not None:
                raise ValueError("a measured front end with --topology: the PD pools run on the engines' clock")
        if self.hedge_after is not None:
            parse_hedge(self.hedge_after)   # names the flag
            refused = [flag for flag, given in (("--replica-fault", self.replica_errors),
                                                ("--topology", self.disaggregated is not None)) if given]
            if refused:
                raise ValueError(f"--hedge-after with {', '.join(refused)}: the plan races a request's two copies on "
                                 "one pool of replicas that answer (rehearse hedging under error bursts with "
                                 "`servecap fleet`)")
        if self.fallback is not None and (self.hedge_after is not None or self.disaggregated is not None):
            raise ValueError(f"--fallback with {'--hedge-after' if self.hedge_after is not None else '--topology'}: "
                             "the plan's fallback tier sits in front of one aggregated pool that does not hedge")
        if isinstance(self.initial_replicas, bool) or not isinstance(self.initial_replicas, int) \
                or self.initial_replicas < 0:
            raise ValueError(f"initial replicas must be an integer >= 0, got {self.initial_replicas!r}")
        if self.autoscaler is None and self.initial_replicas < 1:
            raise ValueError("a fixed fleet needs at least one replica")
        if self.model_mix is not None and self.replica.server.lora is None:
            raise ValueError("a model mix needs replicas that serve LoRA adapters (their slots and step costs: a "
                             "calibration run that served them)")
        if not (isinstance(self.cold_start_s, (int, float)) and math.isfinite(self.cold_start_s)
                and self.cold_start_s >= 0):
            raise ValueError(f"cold start must be seconds >= 0, got {self.cold_start_s!r}")
