"""calculators/cli."""
