"""The crossover a measurement shows: where the speculating curve stops beating the plain one.

    measured_crossover(levels) -> SpeculationCrossover(speculating, plain, axis, levels, tpot_level,
                                                       throughput_level, statement) | None

A curve is one strategy's levels (a side-by-side report's "A: continuous", "B: continuous"). It
speculates when the server's own counters say it proposed (`spec_acceptance_rate`, from vLLM's
spec-decode metrics or the reference server's); the plain curve is the first that never did. The
two are joined on their offered load (concurrency or rate), rising, and the crossover is
`calculators.speculative_crossover`'s: TPOT p50 and output tokens/s as the client measured them.
None when the levels hold no such pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from calculators.speculative_crossover import crossover
from contract.level_result import LevelResult
from contract.summary import SpeculationCrossover


def _curves(levels: Sequence[LevelResult]) -> dict[str, list[LevelResult]]:
    curves: dict[str, list[LevelResult]] = {}
    for level in levels:
        curves.setdefault(level.strategy, []).append(level)
    return curves


def _speculates(curve: list[LevelResult]) -> bool:
    return any(level.server.get("spec_acceptance_rate") is not None for level in curve)


def _by_load(curve: list[LevelResult]) -> dict[tuple[str, float], LevelResult]:
    return {(level.offered.kind, float(level.offered.value)): level for level in curve if level.offered}


def measured_crossover(levels: Sequence[LevelResult]) -> SpeculationCrossover | None:
    curves = _curves(levels)
    speculating = next((name for name, curve in curves.items() if _speculates(curve)), None)
    plain = next((name for name, curve in curves.items() if not _speculates(curve)), None)
    if speculating is None or plain is None:
        return None
    spec, base = _by_load(curves[speculating]), _by_load(curves[plain])
    shared = sorted(set(spec) & set(base), key=lambda key: (key[0], key[1]))
    kinds = {kind for kind, _ in shared}
    if not shared or len(kinds) != 1:
        return None
    axis = "concurrency" if kinds == {"concurrency"} else "rate"

    def tpot(level: LevelResult) -> float | None:
        return level.metrics["tpot_s"].p50

    found = crossover(axis, [value for _, value in shared], [tpot(base[key]) for key in shared],
                      [tpot(spec[key]) for key in shared], [base[key].output_tokens_per_s for key in shared],
                      [spec[key].output_tokens_per_s for key in shared])
    statement = f"{speculating} (speculating) against {plain}: {found.statement()} (measured)"
    return SpeculationCrossover(speculating=speculating, plain=plain, axis=axis,
                                levels=tuple(value for _, value in shared), tpot_level=found.tpot_level,
                                throughput_level=found.throughput_level, statement=statement)
