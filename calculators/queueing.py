"""Queueing models for one serving replica or a fleet of them.

  M/M/c   Erlang C (Erlang 1917; Kleinrock, Queueing Systems vol. 1, 1975, sec. 3.5):
          a = lambda/mu, rho = a/c, P_wait = C(c, a) (computed from the Erlang B recursion),
          Wq = P_wait / (c mu - lambda), P(Wq > t) = P_wait exp(-(c mu - lambda) t)   (exact)
  M/G/1   Pollaczek-Khinchine: Wq = rho (1 + cs^2) / (2 mu (1 - rho)); M/D/1 is cs^2 = 0
  G/G/c   Allen-Cunneen (Kingman 1961 for c = 1): Wq = C(c, a) / (c mu - lambda) x (ca^2 + cs^2) / 2
Tails outside M/M/c use the standard exponential approximation of the waiting time:
  P(Wq > t) = P_wait exp(-t P_wait / Wq), with P_wait = rho for one server, C(c, a) for c.
The response time is waiting + service; its p99 is solved numerically with service time
exponential (cs^2 = 1), deterministic (cs^2 = 0) or gamma with that cv^2 otherwise.
Little's law (L = lambda W) gives the mean numbers in queue and in system.
M/D/1's waiting time has an exact distribution too (Erlang 1909; Crommelin 1932), with
rho = lambda D:
  P(Wq <= t) = (1 - rho) sum_{k=0}^{floor(t/D)} (lambda (k D - t))^k / k! e^{-lambda (k D - t)}
(``md1_response_quantile``; an alternating sum, accurate in float64 while t/D stays below ~30).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from contract.options import option, parse_float


def erlang_c(servers: int, offered_load: float) -> float:
    """P(wait > 0) in M/M/c with ``offered_load`` = lambda / mu erlangs; needs offered_load < servers."""
    if isinstance(servers, bool) or not isinstance(servers, int) or servers <= 0:
        raise ValueError(f"servers must be a positive integer, got {servers!r}")
    if not 0 <= offered_load < servers:
        raise ValueError(f"offered load {offered_load!r} must be in [0, servers={servers}) for a stable queue")
    blocking = 1.0  # Erlang B recursion, B(0) = 1
    for k in range(1, servers + 1):
        blocking = offered_load * blocking / (k + offered_load * blocking)
    return servers * blocking / (servers - offered_load * (1 - blocking))


def littles_law(*, arrival_rate: float | None = None, mean_time_s: float | None = None,
                mean_in_system: float | None = None) -> float:
    """L = lambda W: give two of the three, get the third."""
    given = {k: v for k, v in (("arrival_rate", arrival_rate), ("mean_time_s", mean_time_s),
                               ("mean_in_system", mean_in_system)) if v is not None}
    if len(given) != 2:
        raise ValueError("littles_law needs exactly two of arrival_rate, mean_time_s, mean_in_system")
    for name, value in given.items():
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    if mean_in_system is None:
        return arrival_rate * mean_time_s
    if arrival_rate is None:
        if mean_time_s == 0:
            raise ValueError("mean_time_s must be positive to solve for arrival_rate")
        return mean_in_system / mean_time_s
    if arrival_rate == 0:
        raise ValueError("arrival_rate must be positive to solve for mean_time_s")
    return mean_in_system / arrival_rate


@dataclass(frozen=True)
class QueueResult:
    """``--json`` keys are these field names. Times in seconds."""

    model: str
    arrival_rate: float
    service_rate: float
    servers: int
    utilization: float
    p_wait: float
    mean_wait_s: float
    wait_p99_s: float
    mean_service_s: float
    mean_response_s: float
    response_p99_s: float
    mean_in_queue: float       # Little: lambda x Wq
    mean_in_system: float      # Little: lambda x W
    exact_tail: bool           # True for M/M/c, else the exponential approximation


def _service_survival(t: float, mean: float, cv2: float) -> float:
    from scipy import stats  # imported here: `servecap calc kv` should not pay for scipy

    if cv2 == 0:
        return 1.0 if t < mean else 0.0
    if cv2 == 1.0:
        return math.exp(-t / mean) if t > 0 else 1.0
    shape = 1 / cv2
    return float(stats.gamma.sf(t, a=shape, scale=mean / shape))


def response_quantile(p_wait: float, mean_wait_s: float, mean_service_s: float, service_cv2: float,
                      q: float = 0.99) -> float:
    """q-quantile of wait + service; wait = 0 w.p. 1 - p_wait, else exponential with mean Wq / p_wait.

    Closed forms for deterministic service (cv^2 = 0) and exponential service (cv^2 = 1, the
    hypoexponential sum); other cv^2 integrate a gamma service time numerically.
    """
    from scipy import integrate, optimize

    cond_mean = mean_wait_s / p_wait if p_wait > 0 else 0.0
    if service_cv2 == 0:   # deterministic service D: T = D + wait
        return mean_service_s + (cond_mean * math.log(p_wait / (1 - q)) if p_wait > 1 - q else 0.0)
    mu = 1 / mean_service_s
    theta = 1 / cond_mean if cond_mean > 0 else math.inf

    def survival(t: float) -> float:
        service_only = _service_survival(t, mean_service_s, service_cv2)
        if cond_mean == 0:
            return service_only
        if service_cv2 == 1.0:
            if math.isclose(theta, mu, rel_tol=1e-9):
                both = math.exp(-mu * t) * (1 + mu * t)
            else:
                both = (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu)
        else:
            both = math.exp(-t / cond_mean) + integrate.quad(
                lambda w: _service_survival(t - w, mean_service_s, service_cv2) * math.exp(-w / cond_mean) / cond_mean,
                0, t, limit=200)[0]
        return (1 - p_wait) * service_only + p_wait * both

    high = mean_service_s + cond_mean
    while survival(high) > 1 - q:
        high *= 2
    return float(optimize.brentq(lambda t: survival(t) - (1 - q), 0.0, high, xtol=1e-12, rtol=1e-10))


def _validate(arrival_rate: float, service_rate: float, servers: int, *cv2s: tuple[float, str]) -> None:
    if not isinstance(arrival_rate, (int, float)) or not arrival_rate > 0:
        raise ValueError(f"arrival_rate must be positive, got {arrival_rate!r}")
    if not isinstance(service_rate, (int, float)) or not service_rate > 0:
        raise ValueError(f"service_rate must be positive, got {service_rate!r}")
    if isinstance(servers, bool) or not isinstance(servers, int) or servers <= 0:
        raise ValueError(f"servers must be a positive integer, got {servers!r}")
    for value, name in cv2s:
        if not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    if arrival_rate >= servers * service_rate:
        raise ValueError(f"unstable queue: arrival_rate {arrival_rate:g} must be below servers x service_rate "
                         f"= {servers * service_rate:g} (utilization {arrival_rate / (servers * service_rate):.3f})")


def _result(model: str, lam: float, mu: float, c: int, p_wait: float, wq: float, cs2: float, exact: bool) -> QueueResult:
    cond = wq / p_wait if p_wait > 0 else 0.0
    wait_p99 = cond * math.log(p_wait / 0.01) if p_wait > 0.01 else 0.0
    response = wq + 1 / mu
    return QueueResult(
        model=model, arrival_rate=lam, service_rate=mu, servers=c, utilization=lam / (c * mu), p_wait=p_wait,
        mean_wait_s=wq, wait_p99_s=wait_p99, mean_service_s=1 / mu, mean_response_s=response,
        response_p99_s=response_quantile(p_wait, wq, 1 / mu, cs2), mean_in_queue=lam * wq,
        mean_in_system=littles_law(arrival_rate=lam, mean_time_s=response), exact_tail=exact,
    )


def md1_wait_cdf(arrival_rate: float, service_s: float, t: float) -> float:
    """P(Wq <= t) in M/D/1, exactly (module docstring)."""
    _validate(arrival_rate, 1 / service_s, 1)
    if t < 0:
        return 0.0
    rho = arrival_rate * service_s
    total = 0.0
    for k in range(int(t // service_s) + 1):
        x = arrival_rate * (k * service_s - t)
        total += x ** k / math.factorial(k) * math.exp(-x)
    return min(1.0, max(0.0, (1 - rho) * total))


def md1_response_quantile(arrival_rate: float, service_s: float, q: float) -> float:
    """q-quantile of M/D/1's response time (wait + D), from the exact waiting-time distribution."""
    from scipy import optimize

    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if md1_wait_cdf(arrival_rate, service_s, 0.0) >= q:
        return service_s   # at least q of the requests do not wait
    high = service_s
    while md1_wait_cdf(arrival_rate, service_s, high) < q:
        high *= 2
    wait = optimize.brentq(lambda t: md1_wait_cdf(arrival_rate, service_s, t) - q, 0.0, high, xtol=1e-12)
    return service_s + float(wait)


def mmc(arrival_rate: float, service_rate: float, servers: int = 1) -> QueueResult:
    """M/M/c via Erlang C (exact, including the tails)."""
    _validate(arrival_rate, service_rate, servers)
    p_wait = erlang_c(servers, arrival_rate / service_rate)
    wq = p_wait / (servers * service_rate - arrival_rate)
    return _result("mmc", arrival_rate, service_rate, servers, p_wait, wq, 1.0, True)


def mg1(arrival_rate: float, service_rate: float, service_cv2: float = 1.0) -> QueueResult:
    """M/G/1 via Pollaczek-Khinchine."""
    _validate(arrival_rate, service_rate, 1, (service_cv2, "service_cv2"))
    rho = arrival_rate / service_rate
    wq = rho * (1 + service_cv2) / (2 * service_rate * (1 - rho))
    return _result("mg1", arrival_rate, service_rate, 1, rho, wq, service_cv2, service_cv2 == 1.0)


def md1(arrival_rate: float, service_rate: float) -> QueueResult:
    """M/D/1: Pollaczek-Khinchine with deterministic service (cs^2 = 0)."""
    return replace(mg1(arrival_rate, service_rate, 0.0), model="md1")


def ggc(arrival_rate: float, service_rate: float, servers: int = 1, *, arrival_cv2: float = 1.0,
        service_cv2: float = 1.0) -> QueueResult:
    """G/G/c via Allen-Cunneen (Kingman's formula when servers = 1)."""
    _validate(arrival_rate, service_rate, servers, (arrival_cv2, "arrival_cv2"), (service_cv2, "service_cv2"))
    p_wait = erlang_c(servers, arrival_rate / service_rate)
    wq = p_wait / (servers * service_rate - arrival_rate) * (arrival_cv2 + service_cv2) / 2
    exact = arrival_cv2 == 1.0 and service_cv2 == 1.0
    return _result("ggc", arrival_rate, service_rate, servers, p_wait, wq, service_cv2, exact)



@dataclass(frozen=True)
class Variability:
    """The queueing formulas' variability, once for `calc queue` and `calc fleet` (contract.options): the
    squared coefficients of variation (variance / mean²) of the gaps between arrivals and of the service
    times. Raw cv² (a load's own `--arrival` names its process: contract.arrivals gives its cv²)."""

    arrival_cv2: float = option(1.0, parse=parse_float,
                                help="cv² of the gaps between arrivals (1: Poisson; 0: evenly spaced; default 1)")
    service_cv2: float = option(1.0, parse=parse_float,
                                help="cv² of the service times (1: exponential; 0: deterministic; default 1)")
