"""The registry of batching strategies. A fifth strategy is one new file plus one line here.

A strategy module defines its `Limits` dataclass (flags, defaults, validation, `describe()`,
`max_running`), its `Scheduler` and `STRATEGY = Strategy(name, limits, scheduler, summary)`.
Everything that knows about strategies reads them from here: `EngineConfig` (its `limits`),
`servecap serve`'s "batching limits" flags (`flags.add_limit_arguments`), `GET /v1/engine`
(`limits.describe()`), the simulator (it runs the same scheduler classes), the sweep's
`--strategies` check and the report's running-sequences prediction.

Strategies from outside this package: `register(spec)` in-process, or name their modules in
the environment variable SERVECAP_STRATEGY_MODULES (comma-separated importable module names,
each with a module-level `STRATEGY`); every process that imports this registry (the server,
its spawned engine process, the sweep, the simulator) then registers them at import. One that
cannot be imported is a warning, and the reason is repeated when its strategy is asked for.
Pure: no torch.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from importlib import import_module
from types import MappingProxyType

from engine_core.scheduling.block_manager import BlockManager
from engine_core.scheduling.strategies.base import ScheduledBatch, Scheduler, Strategy
from engine_core.scheduling.strategies.limits import Limits

BUILT_IN = ("none", "static", "dynamic", "continuous")   # modules of this package, in --help order
DEFAULT_STRATEGY = "continuous"
PLUGIN_ENV = "SERVECAP_STRATEGY_MODULES"

_REGISTRY: dict[str, Strategy] = {}
_PLUGIN_ERRORS: list[str] = []   # modules named in PLUGIN_ENV that could not be registered
STRATEGIES: Mapping[str, Strategy] = MappingProxyType(_REGISTRY)   # name -> Strategy, read-only live view


def register(spec: Strategy) -> Strategy:
    """Add `spec` under `spec.name` (registering the same spec again is a no-op); returns it."""
    if not isinstance(spec, Strategy):
        raise TypeError(f"register() takes a Strategy, got {spec!r}")
    if not spec.name or spec.name != spec.name.strip().lower():
        raise ValueError(f"strategy name must be non-empty lower case without spaces, got {spec.name!r}")
    if not (isinstance(spec.limits, type) and issubclass(spec.limits, Limits)):
        raise TypeError(f"strategy {spec.name!r}: limits must be a Limits dataclass, got {spec.limits!r}")
    if not (isinstance(spec.scheduler, type) and issubclass(spec.scheduler, Scheduler)):
        raise TypeError(f"strategy {spec.name!r}: scheduler must be a Scheduler class, got {spec.scheduler!r}")
    known = _REGISTRY.get(spec.name)
    if known is not None and known != spec:
        raise ValueError(f"strategy {spec.name!r} is already registered (by {known.scheduler.__module__})")
    if any(other.limits is spec.limits for other in _REGISTRY.values() if other.name != spec.name):
        raise ValueError(f"strategy {spec.name!r}: {spec.limits.__name__} already belongs to another strategy")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a strategy (tests that registered one clean up with this); unknown names are ignored."""
    _REGISTRY.pop(name, None)


def strategy_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_strategy(name: str) -> Strategy:
    """The strategy registered as `name` (case and surrounding spaces ignored); ValueError lists the choices."""
    spec = _REGISTRY.get(str(name).strip().lower())
    if spec is None:
        raise ValueError(f"strategy must be one of {', '.join(_REGISTRY)}, got {name!r}"
                         + "".join(f" ({error})" for error in _PLUGIN_ERRORS))
    return spec


def strategy_of(limits: Limits) -> Strategy:
    """The strategy whose Limits class `limits` is an instance of."""
    for spec in _REGISTRY.values():
        if type(limits) is spec.limits:
            return spec
    raise ValueError(f"limits must be the Limits of a registered strategy, got {limits!r}")


def resolve(strategy: str | None, limits: Limits | None) -> tuple[str, Limits]:
    """(strategy name, its limits) from either or both: a name alone gets its defaults, limits
    alone name their strategy, neither means the default strategy; both must agree."""
    if limits is None:
        spec = get_strategy(DEFAULT_STRATEGY if strategy is None else strategy)
        return spec.name, spec.limits()
    spec = strategy_of(limits)
    if strategy is not None and get_strategy(strategy) is not spec:
        raise ValueError(f"limits: {type(limits).__name__} belongs to strategy {spec.name!r}, not {strategy!r}")
    return spec.name, limits


def limits_from_flags(strategy: str, values: Mapping[str, object]) -> Limits:
    """The strategy's limits from flat `{field: value}` (the CLI's and run.json's shape).

    Fields the strategy lacks may belong to other registered strategies (one command line
    serves every strategy of a sweep): those are validated by their own strategy, then
    ignored, so a bad value is an error whichever strategy runs. Other names are errors.
    """
    spec = get_strategy(strategy)
    known: set[str] = set()
    for other in _REGISTRY.values():
        names = other.limits.field_names()
        known |= names
        given = {k: v for k, v in values.items() if k in names}
        if other is not spec and given:
            other.limits(**given)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown batching limit(s) {', '.join(unknown)}")
    names = spec.limits.field_names()
    return spec.limits(**{k: v for k, v in values.items() if k in names})


def make_scheduler(limits: Limits, block_manager: BlockManager) -> Scheduler:
    """The scheduler of the strategy that `limits` belong to."""
    return strategy_of(limits).scheduler(limits, block_manager)


def _register_module(name: str) -> None:
    register(import_module(name).STRATEGY)


for _module in BUILT_IN:
    _register_module(f"{__name__}.{_module}")
for _module in filter(None, (m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(","))):
    try:
        _register_module(_module)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:   # said when its strategy is asked for
        _PLUGIN_ERRORS.append(f"{PLUGIN_ENV}: cannot register a strategy from module {_module!r}: {exc}")
        warnings.warn(_PLUGIN_ERRORS[-1], stacklevel=1)

__all__ = ["BUILT_IN", "DEFAULT_STRATEGY", "PLUGIN_ENV", "STRATEGIES", "Limits", "ScheduledBatch", "Scheduler",
           "Strategy", "get_strategy", "limits_from_flags", "make_scheduler", "register", "resolve",
           "strategy_names", "strategy_of", "unregister"]
