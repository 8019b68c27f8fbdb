"""calculators/sim."""
