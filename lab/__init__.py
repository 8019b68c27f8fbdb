"""The lab: benchmarks and evidence, apart from the product.

Each module measures something the product claims or depends on (the load generator's accuracy,
the simulator's speed, the predictions' errors, the gate's false-alarm rate, ...) and is run by hand
as `python -m lab.<package>.<module>` from the repository root; docs/results.md names the command
beside each figure. `lab/<package>/` holds the benchmarks of that product package; `lab/results/`
keeps what a run left worth keeping (lab/README.md).

The product never imports the lab (tests/test_layers.py fails if it does), and the wheel does not
ship it: `servecap` works without this folder. The lab imports the product freely.
"""
