"""PyTorch profiler (Kineto) Chrome-trace JSON: ``*.pt.trace.json[.gz]``, one file per rank.

- :func:`read` - one rank's file into a :class:`tracelens.model.Trace` (docs/kineto.md);
- :func:`write` - a Trace as Kineto JSON (the synthetic scenarios and the parity tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracelens.model import Trace

FORMAT = "kineto"


def read(path: Path) -> Trace:
    from parsers.kineto import reader as _read
    return _read.read(Path(path))


def write(trace: Trace, out: Path, **kwargs: Any) -> list[Path]:
    from parsers.kineto import writer as _write
    return _write.write(trace, Path(out), **kwargs)


__all__ = ["FORMAT", "read", "write"]
