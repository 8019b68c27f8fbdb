"""A run's quality measurement (`servecap quality --out RUN/quality.json`) carried into its report.

    read_quality(run_dir) -> (the measurement | None, a note for `missing` | None)
    quality_sentence(quality) -> "Quality against its reference (...): top1 agreement P% (95% CI ...), ..."
    configuration_statement(label, base, side) -> "B against A: Kx the KV room, Tx output tokens/s at c=N,
                                                   P% top-1 greedy agreement"

A side is (the run's /v1/engine description, its levels, its quality); the statement compares two runs
of one model at the highest offered load both measured (when each ran one strategy), the plan's three
numbers in one line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from contract.level_result import LevelResult

QUALITY_FILE = "quality.json"
HEADLINE = ("top1_agreement", "prefix_agreement")   # the first a measurement has: its greedy agreement


def read_quality(run_dir: str | Path) -> tuple[dict | None, str | None]:
    path = Path(run_dir) / QUALITY_FILE
    if not path.is_file():
        return None, None
    try:
        quality = json.loads(path.read_text())
        quality["measures"]   # noqa: B018 -- the one field the report reads
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{QUALITY_FILE} is unreadable ({exc.__class__.__name__}: {exc}); the quality is left out"
    return quality, None


def _reference(quality: dict) -> str:
    side = quality.get("a") or {}
    if "server_args" in side:
        return f"`{side['server_args'] or 'defaults'}`"
    return side.get("url") or "the reference"


def _agreement(quality: dict) -> tuple[str, dict] | None:
    measures = quality["measures"]
    for name in HEADLINE:
        if (measures.get(name) or {}).get("mean") is not None:
            return name, measures[name]
    return None


def quality_sentence(quality: dict) -> str:
    parts = []
    for name in ("top1_agreement", "prefix_agreement", "positional_agreement"):
        value = quality["measures"].get(name) or {}
        if value.get("mean") is not None:
            low, high = value["ci95"]
            parts.append(f"{name.replace('_', ' ')} {value['mean']:.1%} (95% CI {low:.1%}-{high:.1%})")
    kl = quality["measures"].get("kl_mean") or {}
    if kl.get("mean") is not None:
        parts.append(f"mean KL {kl['mean']:.3g} nats")
    for name in ("perplexity_a", "perplexity_b"):
        value = quality["measures"].get(name) or {}
        if value.get("mean") is not None:
            parts.append(f"perplexity {'reference' if name.endswith('a') else 'this run'} {value['mean']:.4g}")
    return (f"Quality against {_reference(quality)} ({quality.get('prompts')} seeded prompts, "
            f"{quality.get('max_tokens')} greedy tokens each): " + ", ".join(parts))


def _highest_shared_load(base_levels: Sequence[LevelResult],
                         levels: Sequence[LevelResult]) -> tuple[str, LevelResult, LevelResult] | None:
    def by_load(rows: Sequence[LevelResult]) -> dict[tuple[str, float], LevelResult]:
        return {(row.offered.kind, float(row.offered.value)): row for row in rows
                if row.offered and row.output_tokens_per_s}

    if len({row.strategy for row in base_levels}) != 1 or len({row.strategy for row in levels}) != 1:
        return None   # several strategies a side: which curve to compare is not the statement's to choose
    base, mine = by_load(base_levels), by_load(levels)
    shared = sorted(set(base) & set(mine))
    if not shared:
        return None
    kind, value = shared[-1]
    name = {"concurrency": "c", "rate": "rate"}.get(kind, kind)
    return f"{name}={value:g}", base[shared[-1]], mine[shared[-1]]


def configuration_statement(label: str, base_label: str, base: tuple[dict | None, Sequence[LevelResult]],
                            side: tuple[dict | None, Sequence[LevelResult], dict | None]) -> str | None:
    """"B against A: ..." from what the two runs measured; None when they share nothing to compare."""
    base_engine, base_levels = base
    engine, levels, quality = side
    parts = []
    if base_engine and engine and base_engine.get("kv_cache_bytes") and engine.get("kv_cache_bytes"):
        parts.append(f"{engine['kv_cache_bytes'] / base_engine['kv_cache_bytes']:.2g}x the KV room")
    load = _highest_shared_load(base_levels, levels)
    if load is not None:
        at, base_row, row = load
        parts.append(f"{row.output_tokens_per_s / base_row.output_tokens_per_s:.2g}x output tokens/s at {at}")
    agreement = _agreement(quality) if quality else None
    if agreement is not None:
        name, value = agreement
        parts.append(f"{value['mean']:.1%} {'top-1' if name == 'top1_agreement' else 'prefix'} greedy agreement")
    if not parts:
        return None
    quantized = (engine or {}).get("quantization")
    return f"{label}{f' ({quantized})' if quantized else ''} against {base_label}: " + ", ".join(parts)
