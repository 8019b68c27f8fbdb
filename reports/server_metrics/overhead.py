"""Client and server side by side, per level: what the client measured next to what the server did.

    {"ttft_s": {"client_p50", "server_p50", "server_p50_bucket", "overhead_p50", "overhead_share_p50",
                "client_p99", ..., "client_mean", "server_mean", "overhead_mean", "overhead_share_mean"},
     "e2e_s": {...},
     "ttft_split_mean": {"client_s", "overhead_s", "front_end_s", "queue_s", "prefill_s"},
     "warnings": [str]}

overhead = client - server: the client, the network and the server's front end outside the
server's own clock - everything the server's TTFT or E2E does not see.

The TTFT split is of the mean, because means add up and percentiles do not: per request,
client TTFT = overhead + server TTFT, and server TTFT = (the front end's share: HTTP, tokenization,
handing over) + queue + prefill; so client mean = overhead + front_end + queue + prefill exactly.
The server's means come from its histograms' _sum and _count and need no bucket; its percentiles
are only known to their bucket (`server_p50_bucket`), which for vLLM's request-time histograms
(first bucket 300 ms) is wider than a small model's whole request. Pure: summary dicts in, dicts out.
"""

from __future__ import annotations

LARGE_OVERHEAD_SHARE = 0.25   # client-side overhead above this share of the client's TTFT is worth a warning
PAIRED = ("ttft_s", "e2e_s")


def _pair(client: dict, server: dict) -> dict:
    out: dict = {}
    for stat in ("p50", "p99", "mean"):
        c, s = client.get(stat), server.get(stat)
        out[f"client_{stat}"], out[f"server_{stat}"] = c, s
        if stat != "mean":
            out[f"server_{stat}_bucket"] = server.get(f"{stat}_bucket")
        if c is not None and s is not None:
            out[f"overhead_{stat}"] = c - s
            out[f"overhead_share_{stat}"] = (c - s) / c if c > 0 else None
    return out


def _resolved(pair: dict, stat: str) -> bool:
    """The server's percentile is resolved when its bucket is no wider than the client's value."""
    bucket, client = pair.get(f"server_{stat}_bucket"), pair.get(f"client_{stat}")
    return bool(bucket) and client is not None and bucket[1] - bucket[0] <= client


def client_vs_server(level: dict) -> dict:
    """The level's `client_vs_server` from its `metrics` (client) and `server_latency` (server)."""
    server = level.get("server_latency") or {}
    client = level.get("metrics") or {}
    out: dict = {}
    warnings: list[str] = []
    for metric in PAIRED:
        if not server.get(metric):
            continue
        pair = out[metric] = _pair(client.get(metric) or {}, server[metric])
        share = pair.get("overhead_share_mean")
        if share is not None and share > LARGE_OVERHEAD_SHARE:
            warnings.append(f"{metric}: {share:.0%} of the client's mean ({pair['client_mean'] * 1e3:.1f} ms) is "
                            "client, network and front-end overhead, not server time")
        if pair.get("overhead_mean") is not None and pair["overhead_mean"] < 0:
            warnings.append(f"{metric}: the server's mean ({pair['server_mean'] * 1e3:.1f} ms) exceeds the client's "
                            f"({pair['client_mean'] * 1e3:.1f} ms): per request it cannot, so the two windows hold "
                            "different requests at their edges (the server's is bracketed by its scrapes); "
                            "a longer --duration shrinks the edges' share")
        bucket = pair.get("server_p50_bucket")
        if bucket and pair.get("client_p50") is not None and bucket[0] > pair["client_p50"]:
            warnings.append(f"{metric} p50: the server's lies above the client's ({bucket[0] * 1e3:g} ms < server <= "
                            f"{bucket[1] * 1e3:g} ms, client {pair['client_p50'] * 1e3:.1f} ms): requests outside "
                            "the level's window, or a clock problem")
        elif bucket and not _resolved(pair, "p50"):
            warnings.append(f"{metric} p50: the server's histogram only places it in [{bucket[0] * 1e3:g}, "
                            f"{bucket[1] * 1e3:g}] ms, coarser than the client's {pair['client_p50'] * 1e3:.1f} ms; "
                            "compare the means")
    ttft = out.get("ttft_s")
    queue, prefill = (server.get("queue_s") or {}).get("mean"), (server.get("prefill_s") or {}).get("mean")
    if ttft and ttft.get("overhead_mean") is not None:
        split = {"client_s": ttft["client_mean"], "overhead_s": ttft["overhead_mean"], "queue_s": queue,
                 "prefill_s": prefill, "front_end_s": None}
        if queue is not None and prefill is not None:
            split["front_end_s"] = ttft["server_mean"] - queue - prefill
        out["ttft_split_mean"] = split
    out["warnings"] = warnings
    return out
