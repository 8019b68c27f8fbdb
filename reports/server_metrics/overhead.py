"""Client and server side by side, per level: what the client measured next to what the server did.

    ClientVsServer(ttft_s=ClientServerPair(client_p50, server_p50, server_p50_bucket, overhead_p50,
                                           overhead_share_p50, client_p99, ..., client_mean, server_mean,
                                           overhead_mean, overhead_share_mean),
                   e2e_s=..., ttft_split_mean=TtftSplit(client_s, overhead_s, queue_s, prefill_s, front_end_s),
                   warnings=(str, ...))      (contract.level_result)

overhead = client - server: the client, the network and the server's front end outside the
server's own clock - everything the server's TTFT or E2E does not see.

The TTFT split is of the mean, because means add up and percentiles do not: per request,
client TTFT = overhead + server TTFT, and server TTFT = (the front end's share: HTTP, tokenization,
handing over) + queue + prefill; so client mean = overhead + front_end + queue + prefill exactly.
The server's means come from its histograms' _sum and _count and need no bucket; its percentiles
are only known to their bucket (`server_p50_bucket`), which for vLLM's request-time histograms
(first bucket 300 ms) is wider than a small model's whole request. Pure: typed level parts in and out.
"""

from __future__ import annotations

from contract.level_result import (EMPTY, PAIRED_STATS, ClientServerPair, ClientVsServer, Distribution,
                                   ServerHistogram, TtftSplit)

LARGE_OVERHEAD_SHARE = 0.25   # client-side overhead above this share of the client's TTFT is worth a warning
PAIRED = ("ttft_s", "e2e_s")


def _pair(client: Distribution, server: ServerHistogram) -> ClientServerPair:
    out: dict = {}
    for stat in PAIRED_STATS:
        c, s = client.at(stat), server.at(stat)
        out[f"client_{stat}"], out[f"server_{stat}"] = c, s
        if stat != "mean":
            out[f"server_{stat}_bucket"] = server.bucket(stat)
        if c is not None and s is not None:
            out[f"overhead_{stat}"] = c - s
            out[f"overhead_share_{stat}"] = (c - s) / c if c > 0 else None
    return ClientServerPair(**out)


def _resolved(pair: ClientServerPair) -> bool:
    """The server's p50 is resolved when its bucket is no wider than the client's value."""
    bucket, client = pair.server_p50_bucket, pair.client_p50
    return bool(bucket) and client is not None and bucket[1] - bucket[0] <= client


def client_vs_server(client: dict[str, Distribution], server: dict[str, ServerHistogram]) -> ClientVsServer:
    """A level's `client_vs_server` from its `metrics` (the client's) and its `server_latency` (the server's)."""
    pairs: dict[str, ClientServerPair] = {}
    warnings: list[str] = []
    for metric in PAIRED:
        if not server.get(metric):
            continue
        pair = pairs[metric] = _pair(client.get(metric) or EMPTY, server[metric])
        share = pair.overhead_share_mean
        if share is not None and share > LARGE_OVERHEAD_SHARE:
            warnings.append(f"{metric}: {share:.0%} of the client's mean ({pair.client_mean * 1e3:.1f} ms) is "
                            "client, network and front-end overhead, not server time")
        if pair.overhead_mean is not None and pair.overhead_mean < 0:
            warnings.append(f"{metric}: the server's mean ({pair.server_mean * 1e3:.1f} ms) exceeds the client's "
                            f"({pair.client_mean * 1e3:.1f} ms): per request it cannot, so the two windows hold "
                            "different requests at their edges (the server's is bracketed by its scrapes); "
                            "a longer --duration shrinks the edges' share")
        bucket = pair.server_p50_bucket
        if bucket and pair.client_p50 is not None and bucket[0] > pair.client_p50:
            warnings.append(f"{metric} p50: the server's lies above the client's ({bucket[0] * 1e3:g} ms < server <= "
                            f"{bucket[1] * 1e3:g} ms, client {pair.client_p50 * 1e3:.1f} ms): requests outside "
                            "the level's window, or a clock problem")
        elif bucket and not _resolved(pair):
            warnings.append(f"{metric} p50: the server's histogram only places it in [{bucket[0] * 1e3:g}, "
                            f"{bucket[1] * 1e3:g}] ms, coarser than the client's {pair.client_p50 * 1e3:.1f} ms; "
                            "compare the means")
    ttft = pairs.get("ttft_s")
    queue, prefill = (server.get("queue_s") or EMPTY_HISTOGRAM).mean, (server.get("prefill_s") or EMPTY_HISTOGRAM).mean
    split = None
    if ttft and ttft.overhead_mean is not None:
        split = TtftSplit(client_s=ttft.client_mean, overhead_s=ttft.overhead_mean, queue_s=queue, prefill_s=prefill,
                          front_end_s=ttft.server_mean - queue - prefill if queue is not None and prefill is not None
                          else None)
    return ClientVsServer(ttft_s=pairs.get("ttft_s"), e2e_s=pairs.get("e2e_s"), ttft_split_mean=split,
                          warnings=tuple(warnings))


EMPTY_HISTOGRAM = ServerHistogram()
