"""When a request leaves the primary pool for a fallback tier: the rule (`FallbackRule`, nginx's
`max_conns` and `proxy_next_upstream` as calculators.plan.fallback says) and the proxy's view of the
primary over one run (`Gate`, which calculators.plan.fleet consults). Pure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FALLBACK_STATUSES = (429, 500, 502, 503, 504)   # passed on to the backup: nginx's http_429 ... http_504
TIERS = ("primary", "fallback")


@dataclass(frozen=True)
class FallbackRule:
    """When a request goes to the fallback: the primary holds `depth` open requests, or (`on_errors`) it
    answered one of FALLBACK_STATUSES."""

    depth: int | None = None
    on_errors: bool = False

    def __post_init__(self) -> None:
        if self.depth is None and not self.on_errors:
            raise ValueError("a fallback needs a trigger: depth:N, errors, or both")
        if self.depth is not None and (isinstance(self.depth, bool) or not isinstance(self.depth, int)
                                       or self.depth < 1):
            raise ValueError(f"a fallback depth is the primary's open requests, an integer >= 1, got {self.depth!r}")

    @classmethod
    def parse(cls, text: str, flag: str = "--fallback") -> FallbackRule:
        """"depth:N", "errors" or "depth:N,errors"; a bad value raises ValueError naming `flag`."""
        depth, errors = None, False
        for part in (p.strip() for p in str(text).split(",")):
            name, sep, value = part.partition(":")
            if part == "errors" and not errors:
                errors = True
            elif name == "depth" and sep and depth is None:
                try:
                    depth = int(value)
                except ValueError:
                    raise ValueError(f"{flag} {text!r}: depth:N takes an integer, got {value!r}") from None
                if depth < 1:
                    raise ValueError(f"{flag} {text!r}: depth:N is the primary's open requests, at least 1")
            else:
                raise ValueError(f"{flag} {text!r}: {part!r} is not depth:N or errors (once each)")
        return cls(depth, errors)

    def spec(self) -> str:
        return ",".join([*([f"depth:{self.depth}"] if self.depth is not None else []),
                         *(["errors"] if self.on_errors else [])])

    def describe(self) -> str:
        when = [*([f"the primary holds {self.depth} open requests"] if self.depth is not None else []),
                *([f"the primary answers {'/'.join(map(str, FALLBACK_STATUSES))}"] if self.on_errors else [])]
        return " or ".join(when)


class Gate:
    """The proxy's view of the primary over one run of n requests: the requests open to it, and those that
    left for the fallback (`left_s`, NaN: stayed)."""

    def __init__(self, rule: FallbackRule, n: int) -> None:
        self.rule = rule
        self.left_s = np.full(n, np.nan)
        self.open: set[int] = set()

    def full(self, t: float, end_s: np.ndarray, *closed: np.ndarray) -> bool:
        """Whether a request arriving at t finds the primary at its depth: `end_s` is each request's answer's
        end on its client's clock (NaN: not yet); `closed`, bool per request, those that ended otherwise
        (lost, answered an error); both as of t."""
        if self.rule.depth is None:
            return False
        self.open = {i for i in self.open if not (end_s[i] <= t or any(mask[i] for mask in closed))}
        return len(self.open) >= self.rule.depth

    def admit(self, i: int) -> None:
        self.open.add(i)

    def takes(self, status: int) -> bool:
        """Whether a request answered `status` by the primary goes to the fallback."""
        return self.rule.on_errors and status in FALLBACK_STATUSES

    def leave(self, i: int, t: float) -> None:
        self.left_s[i] = t
        self.open.discard(i)
