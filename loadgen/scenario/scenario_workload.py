"""The workload options a classic model's locustfile (classify, embed) read, as that scenario's.

Its own module, not classify.py's: importing a locustfile installs its Locust hooks, so the embed
locustfile must not import the classify one to reach this.
"""

from __future__ import annotations

from types import SimpleNamespace

from contract.workload import WorkloadSpec


def scenario_workload(options, scenario: str) -> WorkloadSpec:
    """The workload options of `loadgen/<scenario>.py`, as that scenario's (ValueError naming one it refuses)."""
    if getattr(options, "scenario", scenario) not in (scenario, "chat", None, ""):
        raise ValueError(f"loadgen/{scenario}.py sends --scenario {scenario} requests, not --scenario "
                         f"{options.scenario}")
    values = dict(vars(options)) if hasattr(options, "__dict__") else {}
    return WorkloadSpec.from_args(SimpleNamespace(**{**values, "scenario": scenario}))
