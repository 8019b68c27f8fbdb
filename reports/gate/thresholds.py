"""What the regression gate checks: thresholds per metric (and optionally per level) and ratio metrics.

Sources, later ones overriding earlier ones for the same key:
1. defaults: 10% on p50 and p99 of every latency metric but TTFA (asked for by name), 10% on output tokens/s;
2. `gate.toml` (`[max_regression]` table and `[[ratio]]` entries);
3. `--max-regression ttft_s.p99=10%,output_tokens_per_s=5%` (a key may carry a level:
   `continuous/c=8@ttft_s.p99=15%`) and `--ratio output_tokens_per_s@continuous/c=8:none/c=8=10%`.

Pure parsing: no I/O here (the CLI reads gate.toml and hands over the parsed dict).
"""

from __future__ import annotations

from dataclasses import dataclass

LATENCY_METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")   # gated by default
# gated when asked (`--max-regression ttfa_s.p99=10%`): a reasoning model's first answer token, which for
# any other server is its TTFT again
OPT_IN_LATENCY_METRICS = ("ttfa_s",)
GATEABLE_LATENCY_METRICS = (*LATENCY_METRICS, *OPT_IN_LATENCY_METRICS)
LATENCY_STATS = ("mean", "p50", "p90", "p95", "p99")
THROUGHPUT_METRICS = ("output_tokens_per_s", "request_rate_rps")
COST_METRICS = ("cpu_s_per_token",)   # server CPU seconds per output token (measured by servecap compare)
DEFAULT_LIMIT = 0.10


@dataclass(frozen=True)
class Threshold:
    """Fail when `metric` (at `stat` for latency) regresses by more than `limit` (a fraction).

    Attributes:
        metric: a latency metric (`ttft_s`, ...) or a throughput metric (`output_tokens_per_s`, ...).
        stat: `p50`, `p99`, `mean`, ... for latency metrics; None for throughput metrics.
        limit: allowed regression as a fraction (0.10 = 10% slower or 10% less throughput).
        level: the level id it applies to; None = every level both runs share.
    """

    metric: str
    stat: str | None
    limit: float
    level: str | None = None

    def __post_init__(self) -> None:
        if self.metric in GATEABLE_LATENCY_METRICS:
            if self.stat not in LATENCY_STATS:
                raise ValueError(
                    f"{self.metric} needs a statistic ({', '.join(LATENCY_STATS)}), e.g. {self.metric}.p99")
        elif self.metric in THROUGHPUT_METRICS or self.metric in COST_METRICS:
            if self.stat is not None:
                raise ValueError(f"{self.metric} takes no statistic (got .{self.stat})")
        else:
            known = ", ".join((*GATEABLE_LATENCY_METRICS, *THROUGHPUT_METRICS, *COST_METRICS))
            raise ValueError(f"unknown metric {self.metric!r}; known: {known}")
        if not 0 < self.limit < 10:
            raise ValueError(f"threshold for {self.key} must be a positive fraction, got {self.limit!r}")

    @property
    def key(self) -> str:
        return self.metric if self.stat is None else f"{self.metric}.{self.stat}"

    @property
    def higher_is_worse(self) -> bool:
        return self.metric in GATEABLE_LATENCY_METRICS or self.metric in COST_METRICS


@dataclass(frozen=True)
class RatioCheck:
    """A ratio measured within each run (e.g. continuous over none throughput), compared across runs.

    Within-run ratios cancel most machine-to-machine speed differences, so they stay
    meaningful when baseline and current ran on different CI hosts.
    """

    metric: str
    numerator: str
    denominator: str
    limit: float

    def __post_init__(self) -> None:
        if self.metric not in THROUGHPUT_METRICS:
            raise ValueError(f"ratio metric must be one of {', '.join(THROUGHPUT_METRICS)}, got {self.metric!r}")
        if not 0 < self.limit < 10:
            raise ValueError(f"ratio threshold must be a positive fraction, got {self.limit!r}")

    @property
    def key(self) -> str:
        return f"{self.metric}[{self.numerator} / {self.denominator}]"


def parse_limit(text: str | float | int) -> float:
    """'10%' -> 0.10, '0.1' -> 0.10, 5 (a number above 1 from TOML) -> 0.05."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
        return value / 100.0 if value >= 1 else value
    raw = str(text).strip()
    try:
        if raw.endswith("%"):
            return float(raw[:-1]) / 100.0
        value = float(raw)
    except ValueError:
        raise ValueError(f"threshold {text!r} is not a number or a percentage like 10%") from None
    return value / 100.0 if value >= 1 else value


def parse_threshold(key: str, limit: str | float) -> Threshold:
    """`[LEVEL@]metric[.stat]` and a limit -> Threshold."""
    level, _, metric_key = key.strip().rpartition("@")
    metric, _, stat = metric_key.partition(".")
    return Threshold(metric=metric, stat=stat or None, limit=parse_limit(limit), level=level or None)


def parse_max_regression(text: str) -> list[Threshold]:
    """'ttft_s.p99=10%,output_tokens_per_s=5%' -> [Threshold, ...]."""
    thresholds = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, limit = item.rpartition("=")
        if not sep or not key:
            raise ValueError(f"--max-regression item {item!r} must look like metric.stat=10%")
        thresholds.append(parse_threshold(key, limit))
    return thresholds


def parse_ratio(text: str) -> RatioCheck:
    """'output_tokens_per_s@continuous/c=8:none/c=8=10%' -> RatioCheck."""
    body, sep, limit = text.strip().rpartition("=")
    metric, at, levels = body.partition("@")
    numerator, colon, denominator = levels.partition(":")
    if not (sep and at and colon and numerator and denominator):
        raise ValueError(f"--ratio {text!r} must look like output_tokens_per_s@NUM_LEVEL:DEN_LEVEL=10%")
    return RatioCheck(metric=metric, numerator=numerator, denominator=denominator, limit=parse_limit(limit))


def default_thresholds() -> list[Threshold]:
    latency = [Threshold(m, s, DEFAULT_LIMIT) for m in LATENCY_METRICS for s in ("p50", "p99")]
    return [*latency, Threshold("output_tokens_per_s", None, DEFAULT_LIMIT)]


def from_toml(config: dict) -> tuple[list[Threshold], list[RatioCheck]]:
    """A parsed gate.toml: `[max_regression]` key = limit, `[[ratio]]` metric/numerator/denominator/max_regression."""
    unknown = set(config) - {"max_regression", "ratio"}
    if unknown:
        raise ValueError(f"gate.toml: unknown section(s) {', '.join(sorted(unknown))}; expected max_regression, ratio")
    table = config.get("max_regression", {})
    if not isinstance(table, dict):
        raise ValueError("gate.toml: [max_regression] must be a table of metric = limit")
    thresholds = [parse_threshold(key, limit) for key, limit in table.items()]
    ratios = []
    for entry in config.get("ratio", []):
        missing = {"metric", "numerator", "denominator", "max_regression"} - set(entry)
        if missing:
            raise ValueError(f"gate.toml: [[ratio]] entry lacks {', '.join(sorted(missing))}")
        ratios.append(RatioCheck(entry["metric"], entry["numerator"], entry["denominator"],
                                 parse_limit(entry["max_regression"])))
    return thresholds, ratios


def merge(*groups: list[Threshold]) -> list[Threshold]:
    """Later groups override earlier ones with the same (level, metric, stat)."""
    merged: dict[tuple, Threshold] = {}
    for group in groups:
        for threshold in group:
            merged[(threshold.level, threshold.metric, threshold.stat)] = threshold
    return list(merged.values())


def add_threshold_arguments(parser, *, example: str = "ttft_s.p99=10%%,output_tokens_per_s=5%%") -> None:
    """--max-regression and --no-defaults, once for the gate and compare (both judge by these thresholds)."""
    parser.add_argument("--max-regression", default="",
                        help=f"comma list of [LEVEL@]metric[.stat]=LIMIT, e.g. {example} (defaults: "
                             "servecap gate's; a compare run gates the p50s at 5%%)")
    parser.add_argument("--no-defaults", action="store_true", help="check only the thresholds given")
