"""calculators/plan: `servecap plan`, a fleet simulated over a demand trace."""
