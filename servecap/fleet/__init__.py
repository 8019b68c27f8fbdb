"""`servecap fleet`: the plan run for real: emulated replicas behind vLLM's router, an autoscaler, faults."""
