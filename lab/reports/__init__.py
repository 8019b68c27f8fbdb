"""Benchmarks and evidence for `reports`: report speed, prediction accuracy and its error sources, the
round spread, the canary's tracking, the front end replayed as a core-0 queue; synthetic runs."""
