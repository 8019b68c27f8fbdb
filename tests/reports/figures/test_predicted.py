"""reports.figures.predicted: the predicted-vs-measured figure of the load-test notebook."""

from contract.level_result import LevelResult
from reports.figures.predicted import _pairs, predicted_vs_measured


def _level(name, comparisons):
    return LevelResult.from_dict({"level": name, "predicted": {"comparisons": comparisons}})


LEVELS = [
    _level("continuous/c=1", {"step_s": {"predicted": 0.004, "measured": 0.005},
                              "e2e_s p99": {"predicted": 0.07, "measured": 0.2}}),
    _level("continuous/c=4", {"step_s": {"predicted": 0.006, "measured": None}}),
    LevelResult(level="none/c=1", predicted=None),
]


def test_pairs_keep_only_levels_with_both_sides():
    assert _pairs(LEVELS, "step_s") == [("continuous/c=1", 0.004, 0.005)]
    assert _pairs(LEVELS, "e2e_s p99") == [("continuous/c=1", 0.07, 0.2)]
    assert _pairs(LEVELS, "ttft_s p99") == []


def test_figure_is_written(tmp_path):
    fig = predicted_vs_measured(LEVELS, tmp_path)
    assert fig.name == "predicted_vs_measured.png"
    assert (tmp_path / fig.name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_predictions_no_figure(tmp_path):
    assert predicted_vs_measured([LevelResult.from_dict({"level": "x", "predicted": {}})], tmp_path) is None
    assert not list(tmp_path.iterdir())
