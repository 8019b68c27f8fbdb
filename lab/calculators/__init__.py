"""Benchmarks and evidence for `calculators`: the simulator's and the plan's speed, the roofline fit's
validation, published serving curves against the simulator."""
