"""`servecap plan --front-end RUN|none`: the host's front end (the delays outside the engine's clock: the
HTTP server, tokenizing, the hop to the engine and back, the client's read) as a measured run found it,
for the plan's replicas (`ReplicaSpec.front_end`, calculators.sim.front_end). A `--calibration` run's own
is the default; a catalog `--gpu` replica has none unless this flag names a run of this host."""

from __future__ import annotations

from calculators.sim.front_end import FrontEndByLoad


def add_front_end_flag(p) -> None:
    p.add_argument("--front-end", metavar="RUN|none",
                   help="the front end's delays per request, as a run with the engine's request records measured "
                        "them on this host (`servecap sweep` against the server the fleet runs); default: the "
                        "--calibration run's own, none for --gpu (the plan on the engine's clock); none: none")


def measured_front_end(run_dir: str, strategy: str | None) -> FrontEndByLoad:
    """The front end per load that `run_dir`'s levels measured (the client's records joined with the engine's
    per request: `reports.predict.calibration`'s rule). ValueError naming the flag when it has none."""
    from reports.predict.evidence import level_samples
    from reports.predict.prediction import _strategy
    from reports.run_data import load_run
    from reports.summary import build_levels

    data = load_run(run_dir)
    samples = level_samples(data, build_levels(data, data.run.slo))
    levels = samples[_strategy(strategy, samples)]
    if not all(s.front_end is not None for s in levels):
        raise ValueError(f"--front-end {run_dir}: the run has no engine request record to join its client's records "
                         "with (a sweep of the reference server or an emulated replica keeps engine_requests.csv)")
    return FrontEndByLoad(tuple(s.streams for s in levels), tuple(s.front_end for s in levels),
                          tuple(s.output_tokens_per_s or 0.0 for s in levels))


def describe_front_end(front: FrontEndByLoad | None) -> dict | None:
    """plan.json's `config.front_end`: its mean delays (ms) at each measured load (the replica's `describe`
    says which run measured them), and the shape fitted across the loads."""
    if front is None:
        return None
    return {"shape": front.shape,
            "levels": [{"streams": load, **{f"{k.removesuffix('_s')}_ms": round(v * 1e3, 3)
                                            for k, v in fe.mean_s.items() if k != "think_s"}}
                       for load, fe in zip(front.loads, front.front_ends)]}
