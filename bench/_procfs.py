"""CPU time of a process on this machine, read from /proc (the benches run PostgreSQL, Redis and their workers here,
so /proc shows every process they account for)."""

from __future__ import annotations

import os
from pathlib import Path


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of a process; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_mib(field: str) -> float:
    """A field of this process's /proc status in MiB (VmRSS, VmHWM, ...); 0 when absent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0
