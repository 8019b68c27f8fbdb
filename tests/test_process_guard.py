"""tests/process_guard.py: an unmarked test that starts a process fails, naming the command."""

import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent


@pytest.mark.slow  # the inner session runs in a subprocess, so its process starts are its own
def test_a_process_start_fails_an_unmarked_test_and_passes_a_marked_one(pytester):
    pytester.makeconftest(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        pytest_plugins = ["process_guard"]
    """)
    pytester.makeini("[pytest]\nmarkers = slow: starts a process\n")
    pytester.makepyfile(test_inner=textwrap.dedent("""
        import multiprocessing, subprocess, sys
        import pytest

        @pytest.fixture(scope="session")
        def server():
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
            yield proc
            proc.kill()
            proc.wait()

        def test_unmarked_run():
            subprocess.run(["true", "unmarked-run"], check=True)

        def test_unmarked_spawn():
            proc = multiprocessing.get_context("spawn").Process(target=print)
            proc.start()
            proc.join()

        @pytest.mark.slow
        def test_marked_uses_server(server):
            assert server.poll() is None

        def test_unmarked_uses_server_already_up(server):
            assert server.poll() is None

        def test_in_process():
            assert sum(range(4)) == 6
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines_random([
        "*test_unmarked_run starts a process but is not marked slow*",
        "*starts true unmarked-run*",
        "*test_unmarked_spawn starts a process*",
        "*starts multiprocessing: *",
        "*uses fixture 'server', which starts *python* -c import time; time.sleep(30)*",
    ])
