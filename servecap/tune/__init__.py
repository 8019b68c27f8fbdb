"""`servecap tune`: search a server's batching configuration for the most throughput under a latency SLO."""
