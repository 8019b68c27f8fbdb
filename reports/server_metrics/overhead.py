"""Client and server side by side, per level: what the client measured next to what the server did.

    {"ttft_s": {"client_p50", "server_p50", "overhead_p50", "overhead_share_p50", ...p99...},
     "e2e_s": {...},
     "ttft_split_p50": {"overhead_s", "queue_s", "prefill_s", "other_s"},
     "warnings": [str]}

overhead = client - server: the client, the network and the server's front end (HTTP parsing,
tokenization, detokenization, SSE) - everything the engine's own clock does not see. The TTFT
split takes the server's queue and prefill percentiles as they are; they do not add up to the
server's TTFT exactly (each is a percentile of its own distribution, in its own buckets), and what
is left is `other_s`. Pure: summary dicts in, dicts out.
"""

from __future__ import annotations

LARGE_OVERHEAD_SHARE = 0.25   # client-side overhead above this share of the client's p50 is worth a warning
PAIRED = ("ttft_s", "e2e_s")


def client_vs_server(level: dict) -> dict:
    """The level's `client_vs_server` from its `metrics` (client) and `server_latency` (server)."""
    server = level.get("server_latency") or {}
    out: dict = {}
    warnings: list[str] = []
    for metric in PAIRED:
        client, own = (level.get("metrics") or {}).get(metric) or {}, server.get(metric) or {}
        pair: dict = {}
        for pct in ("p50", "p99"):
            c, s = client.get(pct), own.get(pct)
            pair[f"client_{pct}"], pair[f"server_{pct}"] = c, s
            if c is not None and s is not None:
                pair[f"overhead_{pct}"] = c - s
                pair[f"overhead_share_{pct}"] = (c - s) / c if c > 0 else None
        if pair.get("server_p50") is not None:
            out[metric] = pair
            share = pair.get("overhead_share_p50")
            if share is not None and share > LARGE_OVERHEAD_SHARE:
                warnings.append(f"{metric} p50: {share:.0%} of the client's {pair['client_p50'] * 1e3:.1f} ms is "
                                "client, network and front-end overhead, not engine time")
            if share is not None and share < -0.05:
                warnings.append(f"{metric} p50: the server's ({pair['server_p50'] * 1e3:.1f} ms) exceeds the "
                                f"client's ({pair['client_p50'] * 1e3:.1f} ms): bucket resolution, or requests "
                                "outside the window")
    ttft = out.get("ttft_s")
    if ttft and ttft.get("overhead_p50") is not None:
        queue = (server.get("queue_s") or {}).get("p50")
        prefill = (server.get("prefill_s") or {}).get("p50")
        split = {"overhead_s": ttft["overhead_p50"], "queue_s": queue, "prefill_s": prefill}
        if queue is not None and prefill is not None:
            split["other_s"] = ttft["server_p50"] - queue - prefill
        out["ttft_split_p50"] = split
    out["warnings"] = warnings
    return out
