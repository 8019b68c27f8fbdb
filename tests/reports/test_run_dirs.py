"""reports.run_dirs: which run directory the load-test notebook opens by default."""

import os

from reports.run_dirs import list_runs, newest_run


def _run(root, name, mtime):
    run = root / name
    run.mkdir()
    records = run / "requests.jsonl"
    records.write_text("{}\n")
    os.utime(records, (mtime, mtime))
    return run


def test_newest_by_last_record_write_not_by_name(tmp_path):
    old = _run(tmp_path, "zzz-old", 1_000)
    new = _run(tmp_path, "aaa-new", 2_000)
    middle = _run(tmp_path, "mmm", 1_500)
    os.utime(old, (3_000, 3_000))  # touching the folder itself does not make a run newer
    assert list_runs(tmp_path) == [new, middle, old]
    assert newest_run(tmp_path) == new


def test_folders_without_records_are_not_runs(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "nested").mkdir()
    _run(tmp_path / "nested", "inner", 1_000)  # only direct children count
    (tmp_path / "requests.jsonl").write_text("{}\n")
    assert list_runs(tmp_path) == []
    assert newest_run(tmp_path) is None


def test_missing_runs_folder_has_no_runs(tmp_path):
    assert newest_run(tmp_path / "nope") is None
