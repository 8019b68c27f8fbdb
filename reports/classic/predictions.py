"""A classify sweep's configurations compared on the same seeded rows (`servecap.experiment.prediction_probe`):
each against the first, the labels that agree and the largest probability difference."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from contract.classic_run import PREDICTIONS_PREFIX


def read_predictions(run_dir: Path, labels: list[str]) -> dict[str, np.ndarray]:
    """{label: probabilities} for the configurations that wrote a probe, in `labels` order."""
    found = {}
    for label in labels:
        path = Path(run_dir) / f"{PREDICTIONS_PREFIX}{label}.npy"
        if path.exists():
            found[label] = np.load(path)
    return found


def compare(predictions: dict[str, np.ndarray]) -> list[dict]:
    """Each configuration after the first against the first: rows, labels equal, max |difference|."""
    if len(predictions) < 2:
        return []
    (base_label, base), *others = predictions.items()
    out = []
    for label, probs in others:
        if probs.shape != base.shape:
            out.append({"reference": base_label, "label": label, "rows": None,
                        "note": f"shapes differ: {list(base.shape)} and {list(probs.shape)}"})
            continue
        out.append({"reference": base_label, "label": label, "rows": int(base.shape[0]),
                    "labels_equal": int((probs.argmax(axis=1) == base.argmax(axis=1)).sum()),
                    "identical": bool(np.array_equal(probs, base)),
                    "max_abs_diff": float(np.abs(probs - base).max())})
    return out


def sentences(comparisons: list[dict]) -> list[str]:
    lines = []
    for c in comparisons:
        if c.get("rows") is None:
            lines.append(f"{c['label']} against {c['reference']}: {c['note']}.")
        elif c["identical"]:
            lines.append(f"{c['label']} against {c['reference']}: identical predictions on all {c['rows']} seeded rows.")
        else:
            lines.append(f"{c['label']} against {c['reference']}: the same label on {c['labels_equal']} of "
                         f"{c['rows']} seeded rows; the probabilities differ by at most {c['max_abs_diff']:.1e} "
                         f"(batches take other matmul kernels than single rows).")
    return lines
