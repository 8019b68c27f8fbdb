"""Paired A/B comparison: per-slice statistics of two interleaved arms, paired tests, verdicts.

`servecap compare` alternates load between arms A and B in slices (AB or BA per pair),
so slow machine drift hits both arms alike; these modules judge the result:
`slices` (records -> one row per slice and arm), `stats` (paired log ratios, Wilcoxon
test, Hodges-Lehmann estimate and interval, SAME/WORSE/BETTER/UNKNOWN), `power` (pairs needed for an
effect), `report` (compare.json / compare.md), and `figure` (per-pair ratios over time).
"""
