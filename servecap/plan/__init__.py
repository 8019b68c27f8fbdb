"""`servecap plan`: a fleet over traffic that moves, simulated (calculators.plan), and its outputs."""
