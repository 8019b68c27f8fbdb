"""calculators/bench."""
