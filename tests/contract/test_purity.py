"""The contract is pure: neither torch nor gevent nor locust, and the Locust side of it not even polars."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow   # each check imports in a fresh interpreter

CHECK = """
import sys
import {modules}
print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'torch', 'gevent', 'locust', 'polars', 'pandas'}}))
"""


def _imported(*modules: str) -> str:
    proc = subprocess.run([sys.executable, "-c", CHECK.format(modules=", ".join(modules))],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_the_contract_imports_nothing_heavy():
    assert _imported("contract.records", "contract.loadgen_meta", "contract.slo",
                     "contract.run_json") == "[]"
    assert _imported("contract.record_schema") == "['polars']"  # only the report imports this one
