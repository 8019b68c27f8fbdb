"""servecap: capacity planning and load testing for model serving.

This package holds only the `servecap` command-line front door; the work lives in
`reference_server`, `loadgen`, `calculators` and `reports`.
"""
