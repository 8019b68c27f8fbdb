"""The prediction wing: what each level measured (evidence), the simulator fitted on it (calibration),
leave-one-level-out validation and its report section, per-level predictions, and `servecap predict`."""
