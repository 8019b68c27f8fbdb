"""How the sweep, compare and the loadgen bench start Locust: its script, else `python -m locust`."""

import sys

from loadgen import locust_command as locust_level


def test_the_script_beside_the_interpreter_when_there_is_one(tmp_path, monkeypatch):
    (tmp_path / "locust").write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert locust_level.locust_executable() == [str(tmp_path / "locust")]


def test_python_dash_m_locust_when_the_interpreter_has_no_script(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert locust_level.locust_executable() == [str(tmp_path / "python"), "-m", "locust"]


def test_the_chat_locustfile_is_the_one_users_run():
    assert locust_level.CHAT_LOCUSTFILE.is_file() and locust_level.CHAT_LOCUSTFILE.parts[-2:] == ("loadgen", "chat.py")
