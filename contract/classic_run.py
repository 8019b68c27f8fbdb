"""Files a classify sweep adds to its run directory, beside the records.

predictions-LABEL.npy: float32 [rows, classes], the probabilities one server configuration (LABEL,
a --server-args-matrix entry or "classifier") gave the sweep's seeded probe rows, in order.
"""

PREDICTIONS_PREFIX = "predictions-"
