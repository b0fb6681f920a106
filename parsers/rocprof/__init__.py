"""rocprofv3 input: the rocpd SQLite database, the JSON and the CSV outputs.

Readers (each returns a single-file :class:`tracelens.core.model.Trace`, one rank per process):

- :func:`read_rocpd` - ``<pid>_results.db`` (the default since ROCm 7.0), opened read-only;
- :func:`read_rpd` - rocmProfileData (``rpd_tracer``) ``.rpd`` databases, opened read-only;
- :func:`read_json` - ``<pid>_results.json[.gz]`` (``rocprofiler-sdk-tool``);
- :func:`read_csv` - ``<pid>_kernel_trace.csv`` and its sibling CSV files, every layout of
  ROCm 6.2 to 7.x and ``rocpd convert``.

The writers (for the tests) are in ``tracelens_dev.writers.rocprof``. See docs/rocprof.md.
"""

from __future__ import annotations

from pathlib import Path

from tracelens.core.model import Trace

FORMATS = ("rocpd", "rpd", "rocprof-json", "rocprof-csv")


def read_rocpd(path: Path, step_marker: str | None = None) -> Trace:
    from parsers.rocprof import rocpd_read
    return rocpd_read.read(Path(path), step_marker=step_marker)


def read_rpd(path: Path, step_marker: str | None = None) -> Trace:
    from parsers.rocprof import rpd_read
    return rpd_read.read(Path(path), step_marker=step_marker)


def read_json(path: Path, step_marker: str | None = None) -> Trace:
    from parsers.rocprof import json_read
    return json_read.read(Path(path), step_marker=step_marker)


def read_csv(path: Path, step_marker: str | None = None) -> Trace:
    from parsers.rocprof import csv_read
    return csv_read.read(Path(path), step_marker=step_marker)


__all__ = ["FORMATS", "read_rocpd", "read_rpd", "read_json", "read_csv"]
