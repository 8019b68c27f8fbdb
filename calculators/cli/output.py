"""How ``servecap calc`` prints: one JSON object with ``--json``, else a readable rich table."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, is_dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from calculators.efficiency import ErrorBand

GIB = 1 << 30


def _console() -> Console:
    """At least 160 columns even when piped, so tables stay readable in logs."""
    console = Console()
    return console if console.width >= 160 else Console(width=160)


def as_dict(result: Any) -> dict:
    return asdict(result) if is_dataclass(result) else dict(result)


def _clean(value: Any) -> Any:
    """JSON has no inf/nan: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return _clean(value.item())
    return value


def print_json(obj: dict) -> None:
    print(json.dumps(_clean(obj), indent=2))


_BAND_KEYS = {"relative", "median", "points", "sources", "scope"}
_BANDED_KEYS = {"value", "low", "high", "band"}


def _readable(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict) and _BAND_KEYS <= set(value):   # an ErrorBand
        return ErrorBand(**value).describe()
    if isinstance(value, dict) and _BANDED_KEYS <= set(value):  # a value with its band (calculators.whatif)
        return (f"{_readable(key, value['value'])} ({_readable(key, value['low'])} to {_readable(key, value['high'])}; "
                f"{value['band']})")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_readable(key, v) for v in value)
    if isinstance(value, int) and (key.endswith("bytes") or "bytes_" in key):
        return f"{value:,} ({value / GIB:.3f} GiB)" if value >= 1 << 20 else f"{value:,}"
    if isinstance(value, float) and key.endswith("_s") and not key.endswith("per_s"):
        return f"{value * 1e3:.3f} ms" if value < 1 else f"{value:,.3f} s"
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_key_values(title: str, obj: dict) -> None:
    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", justify="right")
    for key, value in obj.items():
        if isinstance(value, dict) and not (_BAND_KEYS <= set(value) or _BANDED_KEYS <= set(value)):
            value = ", ".join(f"{k}={_readable(k, v)}" for k, v in value.items())
        table.add_row(key, _readable(key, value))
    _console().print(table)


def print_rows(title: str, rows: list[dict], columns: list[str]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in ("name", "strategy", "description") else "right",
                         no_wrap=column != "description")
    for row in rows:
        table.add_row(*(_readable(c, row.get(c)) if not isinstance(row.get(c), str) else row[c] for c in columns))
    _console().print(table)


def emit(args: Any, title: str, result: Any) -> None:
    obj = as_dict(result)
    print_json(obj) if args.json else print_key_values(title, obj)


def print_speculative(answer: Any) -> None:
    """`calculators.speculative`'s answer: one row per batch, with and without, then the crossover."""
    obj = as_dict(answer)
    rates = ", ".join(f"{a:g}" for a in obj["acceptance"])
    print_rows(f"Speculative decoding ({obj['method']}, k={obj['num_speculative_tokens']}, acceptance {rates}: "
               f"{obj['expected_tokens_per_step']:.2f} tokens per verification step; context {obj['context']})",
               obj["rows"], ["batch", "tpot_plain_s", "tpot_speculative_s", "speedup", "tokens_per_s_plain",
                             "tokens_per_s_speculative", "verify_step_s", "draft_s"])
    _console().print(obj["note"])
