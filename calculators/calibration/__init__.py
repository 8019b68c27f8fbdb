"""calculators/calibration: published GPU measurements, the fit of the roofline to them, its validation."""
