"""The options of a prediction from a measured run, once for `servecap predict` and `servecap plan`: the
run that calibrates the simulator, how many seeded runs it makes, and the run that times a draft model
(contract.options). The rest of what they take is their owners': the engine's (--strategy, --max-loras,
--speculative-*), the workload's lengths, the load, the SLO."""

from __future__ import annotations

from dataclasses import dataclass

from contract.options import option, parse_int


@dataclass(frozen=True)
class CalibrationOptions:
    calibration: str | None = option(None, metavar="RUN_DIR",
                                     help="a run directory measured with the engine's step record (servecap sweep): "
                                          "the simulator calibrated on it")
    replications: int | None = option(None, parse=parse_int,
                                      help="seeded simulated runs (predict: per load, default 8; plan: for the breach "
                                           "probability, default 1)")
    speculative_draft_calibration: str | None = option(None, metavar="RUN_DIR",
                                                       help="a draft model's run, whose calibrated steps time its "
                                                            "passes (speculative decoding with a draft)")
