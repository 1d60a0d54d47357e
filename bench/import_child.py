#!/usr/bin/env python
"""`manage.py import_sessions ARGS` with its own clock: run by bench/import_sessions.py as the import's process.

    python bench/import_child.py TIMES_FILE import_sessions PATH --team T [...]

Python and Django start first (django.setup(), the command's module imported); then the command runs as manage.py would
run it (without Django's system checks, start-up work of any command), and TIMES_FILE receives, as JSON, the wall and
CPU seconds (every thread of the process, and its worker processes) from that moment to the command's end: the import
alone, start-up excluded, whatever the machine's load. The benchmark subtracted an empty import's wall time instead,
which on a loaded machine is noise larger than the import. The exit status and the output are the command's.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(times_file: str, argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")
    import django
    from django.core.management import execute_from_command_line

    django.setup()
    from memory.management.commands import import_sessions

    # Django's system checks (they import every URL conf, view and template library: about a second of CPU) are
    # start-up too: skipped, where the command runs them, so that the clock sees the import alone.
    skip = ["--skip-checks"] if import_sessions.Command.requires_system_checks else []
    wall, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    try:
        execute_from_command_line(["manage.py", *argv, *skip])
    finally:
        # The CPU of the worker processes that converted a folder's files (memory.importing.convert_in_pool) counts
        # too: they are the command's, ended and waited for by its end.
        workers = _children_cpu() - children
        times = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu + workers, "workers_cpu": workers}
        Path(times_file).write_text(json.dumps(times))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    run(sys.argv[1], sys.argv[2:])
