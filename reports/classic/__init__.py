"""The report of a classic model's sweep (`servecap sweep --scenario classify`): throughput against
latency percentiles, the server's queue and compute split, the batches it formed, and memory."""
