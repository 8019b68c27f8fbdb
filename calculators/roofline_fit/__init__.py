"""calculators/roofline_fit: published GPU measurements, the roofline efficiency profile fitted to them, its validation."""
