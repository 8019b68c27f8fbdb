"""The lab stays out of the product (lab/README.md): the wheel's packages leave it out, and git keeps
no raw run data (every tracked file under 1 MB, the tree under 15 MB). That no product module
imports the lab is tests/test_layers.py's."""

import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_FILE_BYTES = 1_000_000
MAX_TREE_BYTES = 15_000_000


def test_the_wheel_packages_leave_the_lab_and_every_bench_folder_out():
    setuptools = pytest.importorskip("setuptools")
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    # pyproject's [packages.find] finds namespace packages too
    packages = setuptools.find_namespace_packages(str(REPO), include=find["include"], exclude=find.get("exclude", ()))
    assert {"servecap", "reference_server.engine_bench", "engine_core.catalog"} <= set(packages)
    assert [p for p in packages if p.split(".")[0] == "lab" or "bench" in p.split(".")] == []


@pytest.mark.slow
def test_git_keeps_no_raw_run_data():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    sizes = {name: (REPO / name).stat().st_size for name in listed.decode().split("\0")
             if name and (REPO / name).is_file()}
    big = sorted(f"{name} ({size:,} bytes)" for name, size in sizes.items() if size >= MAX_FILE_BYTES)
    assert big == [], "raw run data belongs outside git (lab/README.md); regenerate it with its command"
    assert sum(sizes.values()) < MAX_TREE_BYTES
