"""loadgen/workload."""
