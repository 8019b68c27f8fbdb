"""How the runner measures, whatever the experiment: its samplers, where it pins the load generator
and the server, how many Locust processes, and the instruments for a machine whose speed drifts.

`add_run_arguments(parser)` declares these options once; every measuring command takes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract.options import add_options, option, options_from_args, parse_duration, parse_int
from servecap.experiment.loadgen_priority import PRIORITY_MODES


@dataclass(frozen=True)
class RunOptions:
    """How the runner measures; its fields are the options (contract.options). The last three are set by
    the command, not the command line: the stability tolerance, the startup timeout, and whether the
    target's own /metrics and step record are read (a router's fleet reads its replicas' instead)."""

    sample_interval_s: float = option(0.5, flag="--sample-interval", text="0.5", parse=parse_duration,
                                      help="sampler and /metrics scrape interval (default 0.5s)")
    pin_cpus: bool = option(True, flag="--no-pin-cpus", kind="off",
                            help="let the OS place Locust and the server (default: Locust on core 0, the engine "
                                 "process on cores of its own; see servecap.experiment.cpu_pinning)")
    loadgen_processes: int = option(1, parse=parse_int,
                                    help="Locust processes per level (a master and N workers sharing the users or the "
                                         "arrival schedule); each gets a core of its own when there are N + 2 cores")
    loadgen_external_workers: int = option(0, parse=parse_int,
                                           help="Locust workers on other machines that join each level (run there, in "
                                                "a loop, as each level's master ends them: locust -f loadgen/chat.py "
                                                "--worker --master-host THIS_HOST --master-port PORT); the master "
                                                "waits for them and the local --loadgen-processes")
    loadgen_master_bind: str = option("127.0.0.1",
                                      help="where each level's Locust master listens for workers (default "
                                           "127.0.0.1; 0.0.0.0 or this host's address for workers on other machines)")
    loadgen_master_port: int = option(5557, parse=parse_int, help="the master's port for workers (default 5557)")
    loadgen_worker_wait_s: float = option(60.0, flag="--loadgen-worker-wait", text="60s", parse=parse_duration,
                                          help="how long a level waits for its workers to join")
    loadgen_priority: str = option("realtime", choices=PRIORITY_MODES,
                                   help="Locust's scheduling priority where allowed (root): realtime (default; "
                                        "SCHED_FIFO 1, so a chunk's arrival wakes it at once on the core it shares "
                                        "with the server's front end), nice (nice -10) or normal; falls back to the "
                                        "next where not allowed")
    diagnostics: bool = option(False, kind="switch",
                               help="also measure the machine itself, for a host whose speed drifts (a shared VM): a "
                                    "canary process times each core (canary.csv, the host's steal time), and a "
                                    "level's stability is judged at the machine's usual speed from the engine's steps")
    model_config: str | None = option(None, metavar="PATH",
                                      help="the served model's HF config.json (or its directory): the report predicts "
                                           "KV bytes per token and the KV block count from it (needed for an "
                                           "external target)")
    hedge_after: str | None = None   # --hedge-after (contract.hedging declares it): every level's requests hedged
    stability_tolerance: float = 0.10
    startup_timeout_s: float = 180.0
    observe_server: bool = True

    def __post_init__(self) -> None:
        if self.loadgen_priority not in PRIORITY_MODES:
            raise ValueError(f"--loadgen-priority must be one of {', '.join(PRIORITY_MODES)}, "
                             f"not {self.loadgen_priority!r}")
        if not 0 < self.stability_tolerance < 1:
            raise ValueError("the stability tolerance must be a fraction in (0, 1)")
        if self.loadgen_processes < 1:
            raise ValueError(f"--loadgen-processes must be >= 1, got {self.loadgen_processes}")
        if self.loadgen_external_workers < 0:
            raise ValueError(f"--loadgen-external-workers must be >= 0, got {self.loadgen_external_workers}")
        if not 0 < self.loadgen_master_port < 65536:
            raise ValueError(f"--loadgen-master-port must be a TCP port (1-65535), got {self.loadgen_master_port}")
        if not self.loadgen_worker_wait_s > 0:
            raise ValueError("--loadgen-worker-wait must be positive")
        if not self.sample_interval_s > 0:
            raise ValueError("--sample-interval must be positive")
        from contract.hedging import parse_hedge

        parse_hedge(self.hedge_after)   # names the flag
        if self.model_config is not None:
            from engine_core.hf_config import load_hf_config

            try:
                load_hf_config(self.model_config)
            except ValueError as exc:
                raise ValueError(f"--model-config: {exc}") from None

    @classmethod
    def from_args(cls, args: Any, **overrides: Any) -> "RunOptions":
        overrides.setdefault("hedge_after", getattr(args, "hedge_after", None) or None)
        return cls(**options_from_args(cls, args, **overrides))


def add_run_arguments(parser: Any, *, title: str = "measurement") -> None:
    """The runner's options, once for every measuring command (and --hedge-after, contract.hedging's)."""
    from contract.hedging import add_hedge_arguments

    add_options(parser, RunOptions, title=title)
    add_hedge_arguments(parser.add_argument_group("hedging"), only=("hedge-after",))
