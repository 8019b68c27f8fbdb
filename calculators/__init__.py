"""Pure capacity calculators: memory, KV cache, max batch, roofline, queueing, fleet, cost."""
