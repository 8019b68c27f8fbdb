"""Command-line flags for every registered strategy's limits (`servecap serve`, `servecap calc simulate`).

Each limit field becomes one flag: `max_num_seqs` -> `--max-num-seqs`, parsed by the field's
`parse`, help "continuous: most running sequences (default 32)". Every strategy's flags are
accepted whichever `--strategy` is chosen (a sweep passes one command line to all of them);
`limits_from_flags` validates them all and keeps the chosen strategy's. A flag left out is
absent from the namespace, so the strategy's own default applies.
"""

from __future__ import annotations

import argparse

from engine_core.scheduling.strategies import STRATEGIES, limits_from_flags
from engine_core.scheduling.strategies.limits import Limits, flag_for


def add_limit_arguments(group, only: tuple[str, ...] | None = None) -> None:
    """Add one flag per limit field of the registered strategies to `group` (a parser or argument group);
    `only`: these flags' names only (e.g. `servecap calc fit`: max-num-seqs, max-num-batched-tokens)."""
    owners: dict[str, list[str]] = {}
    first = {}
    for spec in STRATEGIES.values():
        for f in spec.limits.limit_fields():
            owners.setdefault(f.name, []).append(spec.name)
            first.setdefault(f.name, f)
    if only is not None:
        unknown = set(only) - {flag_for(name)[2:] for name in first}
        if unknown:
            raise ValueError(f"no strategy has the limit {', '.join(sorted(unknown))}")
        first = {name: f for name, f in first.items() if flag_for(name)[2:] in only}
    for name, f in first.items():
        shown = (",".join(map(str, f.default)) or "none") if isinstance(f.default, tuple) else f.default
        if isinstance(f.default, bool):
            shown = "on" if f.default else "off"
        extra = {"choices": f.metadata["choices"]} if f.metadata.get("choices") else {}
        if f.metadata.get("metavar"):
            extra["metavar"] = f.metadata["metavar"]
        group.add_argument(flag_for(name), dest=name, type=f.metadata["parse"], default=argparse.SUPPRESS,
                           help=f"{', '.join(owners[name])}: {f.metadata['help']} (default {shown})", **extra)


def limit_values(args: argparse.Namespace) -> dict:
    """{field: value} of the limit flags given on the command line."""
    names = {f.name for spec in STRATEGIES.values() for f in spec.limits.limit_fields()}
    return {name: value for name, value in vars(args).items() if name in names}


def limits_from_args(strategy: str, args: argparse.Namespace) -> Limits:
    """The chosen strategy's limits from parsed flags (ValueError names a bad field)."""
    return limits_from_flags(strategy, limit_values(args))
