"""Device samplers writing `samples.csv`: NVML per GPU, or the host when NVML is missing.

Columns (DESIGN.md): t, source, device, util_pct, mem_used_bytes, mem_total_bytes,
power_w, sm_clock_mhz, temp_c.

- NVML (`import pynvml`, from nvidia-ml-py): one row per GPU per tick, source "nvml",
  device = GPU index; util = utilization.gpu, memory used/total, power (mW -> W),
  SM clock, GPU temperature. A metric the GPU does not support stays empty.
- Host fallback when NVML cannot start (no package, no driver, no GPU): source "host",
  util = CPU % of `pid` (the server process, children included) or of the whole machine,
  mem_used = that process tree's RSS (or used RAM), mem_total = RAM; GPU columns empty.
  The fallback is said once (log warning and `Sampler.note`).

    sampler = start_sampler("runs/x/samples.csv", interval_s=1.0, pid=server_pid)
    ...
    sampler.stop()
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import psutil

from loadgen.observe.periodic_csv import PeriodicCsv

log = logging.getLogger(__name__)

SAMPLE_COLUMNS = ("t", "source", "device", "util_pct", "mem_used_bytes", "mem_total_bytes",
                  "power_w", "sm_clock_mhz", "temp_c")


class NvmlSource:
    """Reads every GPU through NVML. Raises at construction when NVML cannot start."""

    kind = "nvml"

    def __init__(self) -> None:
        import pynvml  # nvidia-ml-py; ImportError when not installed

        self.nvml = pynvml
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        if count < 1:
            pynvml.nvmlShutdown()
            raise RuntimeError("NVML found no GPU")
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.names = [_text(pynvml.nvmlDeviceGetName(h)) for h in self.handles]

    def _get(self, fn, *args):
        try:
            return fn(*args)
        except self.nvml.NVMLError:  # e.g. power or clocks unsupported on this board
            return None

    def read(self, t: float) -> list[tuple]:
        nv = self.nvml
        rows = []
        for index, handle in enumerate(self.handles):
            util = self._get(nv.nvmlDeviceGetUtilizationRates, handle)
            mem = self._get(nv.nvmlDeviceGetMemoryInfo, handle)
            power_mw = self._get(nv.nvmlDeviceGetPowerUsage, handle)
            clock = self._get(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM)
            temp = self._get(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU)
            rows.append((t, "nvml", str(index), None if util is None else util.gpu,
                         None if mem is None else mem.used, None if mem is None else mem.total,
                         None if power_mw is None else power_mw / 1000.0, clock, temp))
        return rows

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass


class HostSource:
    """CPU % and RSS of a process tree (the server), or of the whole machine."""

    kind = "host"

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self.total = psutil.virtual_memory().total
        self._procs: dict[int, psutil.Process] = {}
        if pid is not None:
            try:
                self._root = psutil.Process(pid)
            except psutil.NoSuchProcess:
                raise ValueError(f"pid: no process {pid}") from None
            self._tree()  # prime cpu_percent
        else:
            psutil.cpu_percent(None)

    def _tree(self) -> list[psutil.Process]:
        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        alive = []
        for proc in procs:  # keep Process objects so cpu_percent measures since the last tick
            if proc.pid not in self._procs:
                self._procs[proc.pid] = proc
                proc.cpu_percent(None)  # prime: a new process reads 0 on its first tick
            alive.append(self._procs[proc.pid])
        return alive

    def read(self, t: float) -> list[tuple]:
        if self.pid is None:
            return [(t, "host", "", psutil.cpu_percent(None), psutil.virtual_memory().used, self.total,
                     None, None, None)]
        cpu = rss = 0.0
        for proc in self._tree():
            try:
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return [(t, "host", f"pid:{self.pid}", cpu, int(rss), self.total, None, None, None)]

    def close(self) -> None:
        pass


def open_source(pid: int | None = None, prefer_nvml: bool = True):
    """(source, note): NVML when it starts, else the host with a note saying why."""
    if prefer_nvml:
        try:
            return NvmlSource(), None
        except Exception as exc:  # noqa: BLE001 - ImportError, NVMLError_*, no GPU: all mean "no NVML"
            note = f"NVML unavailable ({type(exc).__name__}: {exc}); sampling the host CPU and memory instead"
            log.info(note)   # the caller says it to the user, once (the sweep, `servecap sample`)
            return HostSource(pid), note
    return HostSource(pid), None


class Sampler:
    """A thread appending one row per device every `interval_s` to a CSV (flushed per tick)."""

    def __init__(self, out_csv: str | Path, interval_s: float = 1.0, pid: int | None = None,
                 source=None) -> None:
        self.path = Path(out_csv)
        self._csv = PeriodicCsv(self.path, SAMPLE_COLUMNS, interval_s, self._read, "servecap-sampler")
        self.interval_s = interval_s
        self.source, self.note = (source, None) if source is not None else open_source(pid)

    @property
    def kind(self) -> str:
        return self.source.kind

    @property
    def rows_written(self) -> int:
        return self._csv.rows_written

    def _read(self) -> list[tuple]:
        return self.source.read(time.time())

    def start(self) -> "Sampler":
        self._csv.start()
        return self

    def stop(self) -> None:
        self._csv.stop()
        self.source.close()


def start_sampler(out_csv: str | Path, interval_s: float = 1.0, pid: int | None = None) -> Sampler:
    """Start sampling NVML (or the host) into `out_csv`; call `.stop()` to end."""
    return Sampler(out_csv, interval_s, pid).start()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
