"""A Trace as rocprofv3 output: the rocpd SQLite database, the JSON and the CSV files; and
as rocmProfileData's RPD database.

:func:`write_rocpd`, :func:`write_rpd`, :func:`write_json`, :func:`write_csv` (every CSV
layout of ROCm 6.2 to 7.x and ``rocpd convert``). See docs/rocprof.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracelens.core.model import Trace


def write_rocpd(trace: Trace, path: Path, **kwargs: Any) -> list[Path]:
    from tracelens_dev.writers.rocprof import rocpd_write
    return rocpd_write.write(trace, Path(path), **kwargs)


def write_rpd(trace: Trace, path: Path, **kwargs: Any) -> list[Path]:
    from tracelens_dev.writers.rocprof import rpd_write
    return rpd_write.write(trace, Path(path), **kwargs)


def write_json(trace: Trace, path: Path, **kwargs: Any) -> list[Path]:
    from tracelens_dev.writers.rocprof import json_write
    return json_write.write(trace, Path(path), **kwargs)


def write_csv(trace: Trace, out_dir: Path, layout: str = "7", **kwargs: Any) -> list[Path]:
    from tracelens_dev.writers.rocprof import csv_write
    return csv_write.write(trace, Path(out_dir), layout=layout, **kwargs)


__all__ = ["write_rocpd", "write_rpd", "write_json", "write_csv"]
