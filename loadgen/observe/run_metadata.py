"""run.json's description of where and with what a run happened: host, GPUs, versions, git commit.

GPU names and the driver come from NVML when it is present (nvidia-ml-py's `pynvml`);
without a driver the host is described alone and `gpus` is an empty list.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from contract.run_json import Host

VERSIONED = ("servecap", "locust", "torch", "fastapi", "uvicorn", "numpy", "pandas", "scipy", "nvidia-ml-py")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_inventory() -> tuple[list[str], str | None]:
    """(GPU names, driver version) via NVML; ([], None) without a usable driver."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no GPU: all mean "no GPUs here"
        return [], None
    try:
        names = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        driver = pynvml.nvmlSystemGetDriverVersion()
        return names, driver.decode() if isinstance(driver, bytes) else str(driver)
    finally:
        pynvml.nvmlShutdown()


def host_info() -> Host:
    gpus, driver = gpu_inventory()
    return Host(hostname=platform.node(), cpu_model=cpu_model(), cores=os.cpu_count(),
                os=platform.platform(), python=sys.version.split()[0], gpus=gpus, driver=driver)


def versions() -> dict[str, str]:
    found = {}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def git_commit(cwd: Path | None = None) -> str | None:
    """The checkout's commit (with '-dirty' when it has uncommitted changes), None outside git."""
    cwd = cwd or Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")
