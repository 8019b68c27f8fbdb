"""Samplers: NVML through a fake `pynvml` module (the same code path as a GPU), host fallback."""

import subprocess
import logging
import sys
import types

import pandas as pd
import pytest

from loadgen.observe.samplers import SAMPLE_COLUMNS, HostSource, NvmlSource, Sampler, open_source, start_sampler
from waiting import wait_until


class FakeNVMLError(Exception):
    pass


def fake_pynvml(gpus: int = 2, init_error: str | None = None) -> types.ModuleType:
    """A stand-in for nvidia-ml-py with the calls the sampler makes; GPU 1 has no power sensor."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = FakeNVMLError
    mod.NVML_CLOCK_SM = 1
    mod.NVML_TEMPERATURE_GPU = 0
    mod.calls = {"init": 0, "shutdown": 0}

    def init():
        if init_error:
            raise FakeNVMLError(init_error)
        mod.calls["init"] += 1

    mod.nvmlInit = init
    mod.nvmlShutdown = lambda: mod.calls.__setitem__("shutdown", mod.calls["shutdown"] + 1)
    mod.nvmlDeviceGetCount = lambda: gpus
    mod.nvmlDeviceGetHandleByIndex = lambda i: f"handle{i}"
    mod.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=40 + int(h[-1]), memory=5)
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=(1 + int(h[-1])) * 2**30, total=141 * 2**30, free=0)

    def power(h):
        if h == "handle1":
            raise FakeNVMLError("Not Supported")
        return 350_500  # milliwatts

    mod.nvmlDeviceGetPowerUsage = power
    mod.nvmlDeviceGetClockInfo = lambda h, kind: 1980 if kind == mod.NVML_CLOCK_SM else 0
    mod.nvmlDeviceGetTemperature = lambda h, sensor: 61 if sensor == mod.NVML_TEMPERATURE_GPU else 0
    return mod


def test_nvml_sampler_writes_one_row_per_gpu_per_tick(tmp_path, monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    out = tmp_path / "samples.csv"
    sampler = start_sampler(out, interval_s=0.05)
    assert sampler.kind == "nvml" and sampler.note is None
    wait_until(lambda: sampler.rows_written >= 8, what="four ticks of two GPUs")
    sampler.stop()
    frame = pd.read_csv(out, dtype={"device": str})
    assert tuple(frame.columns) == SAMPLE_COLUMNS
    assert len(frame) == sampler.rows_written and len(frame) >= 8 and len(frame) % 2 == 0
    gpu0, gpu1 = frame[frame.device == "0"].iloc[0], frame[frame.device == "1"].iloc[0]
    assert (gpu0.source, gpu0.util_pct, gpu0.mem_used_bytes, gpu0.mem_total_bytes) == ("nvml", 40, 2**30, 141 * 2**30)
    assert gpu0.power_w == pytest.approx(350.5) and gpu0.sm_clock_mhz == 1980 and gpu0.temp_c == 61
    assert gpu1.util_pct == 41 and pd.isna(gpu1.power_w)  # unsupported sensor -> empty, not a crash
    assert frame.t.is_monotonic_increasing
    assert fake.calls == {"init": 1, "shutdown": 1}


def test_host_fallback_when_nvml_library_is_missing(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error="NVML Shared Library Not Found"))
    with caplog.at_level(logging.INFO):   # logged at info: the caller says it to the user, once
        source, note = open_source()
    assert isinstance(source, HostSource) and "NVML Shared Library Not Found" in note
    assert "sampling the host" in caplog.text
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed at all -> ImportError
    source, note = open_source()
    assert isinstance(source, HostSource) and "ModuleNotFoundError" in note
    with pytest.raises(RuntimeError, match="no GPU"):
        monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus=0))
        NvmlSource()


@pytest.mark.slow
def test_host_sampler_follows_a_process_tree(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nblob = bytearray(200 * 2**20)\nprint('ready', flush=True)\n"
                             "end = time.time() + 5\nwhile time.time() < end: pass"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline().strip() == "ready"
        sampler = Sampler(tmp_path / "samples.csv", interval_s=0.2, pid=busy.pid).start()
        wait_until(lambda: sampler.rows_written >= 4, what="four samples of the busy process")
        sampler.stop()
    finally:
        busy.kill()
        busy.wait()
    frame = pd.read_csv(tmp_path / "samples.csv")
    assert set(frame.source) == {"host"} and set(frame.device) == {f"pid:{busy.pid}"}
    assert frame.mem_used_bytes.min() > 200 * 2**20
    assert frame.util_pct.iloc[1:].max() > 20  # the busy loop shows up as CPU
    assert frame[["power_w", "sm_clock_mhz", "temp_c"]].isna().all().all()


def test_host_sampler_rejects_missing_pid():
    with pytest.raises(ValueError, match="no process"):
        HostSource(pid=2**22 + 12345)
    with pytest.raises(ValueError, match="interval_s"):
        Sampler("x.csv", interval_s=0, source=HostSource())
