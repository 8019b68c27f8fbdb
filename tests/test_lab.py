"""The lab stays out of the product (lab/README.md): the wheel's packages leave it out. That no product
module imports the lab is tests/test_layers.py's."""

import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_packages_leave_the_lab_and_every_bench_folder_out():
    setuptools = pytest.importorskip("setuptools")
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    # pyproject's [packages.find] finds namespace packages too
    packages = setuptools.find_namespace_packages(str(REPO), include=find["include"], exclude=find.get("exclude", ()))
    assert {"servecap", "reference_server.engine_bench", "engine_core.catalog"} <= set(packages)
    assert [p for p in packages if p.split(".")[0] == "lab" or "bench" in p.split(".")] == []
