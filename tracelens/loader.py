"""``tracelens.load``: paths in, one classified, validated :class:`Trace` out.

Finds the trace files behind each path, detects each file's format from its content, reads
them with the matching parser, joins hosts onto one clock, repairs same-stream overlaps, marks
steps and classifies every event. This module and the CLI are the only places in the core that
know the parsers.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

import polars as pl

from tracelens.classify import RuleSet, classify
from tracelens.errors import TraceInputError
from tracelens.model import STEP_SCHEMA, Trace, TraceMeta, validate
from tracelens.prepare import assign_steps, clip_stream_overlaps

XSPACE_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")
_RUN_DIR = re.compile(r"plugins/profile/[^/]+$")


def sniff_format(path: Path) -> str:
    """The format of one file, from its first bytes (and, for gzip, its first inflated bytes)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not head:
        raise TraceInputError(path, "empty file")
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(4096)
        except (OSError, EOFError) as exc:
            raise TraceInputError(path, f"corrupt or truncated gzip data ({exc})") from None
        if not head:
            raise TraceInputError(path, "empty file (after gunzip)")
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    text = head.lstrip()[:4096]
    if text[:1] in (b"{", b"["):
        if b"rocprofiler-sdk-tool" in text:
            return "rocprof-json"
        if b"traceEvents" in text:
            return "chrome-json"
        return "json"
    if head[:1] == b"\x0a":
        return "xspace"
    if path.name.endswith(XSPACE_SUFFIXES):
        return "xspace"  # let the XSpace reader say precisely what is wrong
    return "unknown"


def find_inputs(path: Path) -> list[Path]:
    """Trace files behind one path: the file itself, or the XSpace files of one profile run."""
    if not path.exists():
        raise TraceInputError(path, "no such file or directory")
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TraceInputError(path, "not a regular file or directory")
    found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(XSPACE_SUFFIXES))
    if not found:
        raise TraceInputError(path, "directory holds no trace files (*.xplane.pb[.gz])")
    runs = sorted({p.parent for p in found})
    if len(runs) > 1 and all(_RUN_DIR.search(r.as_posix()) for r in runs):
        names = ", ".join(r.name for r in runs[:5])
        raise TraceInputError(path, f"holds {len(runs)} profile runs ({names}"
                              f"{', ...' if len(runs) > 5 else ''}); pass one run directory")
    return found


def _reader_for(fmt: str, path: Path) -> Callable[[Path], Trace]:
    if fmt == "xspace":
        from parsers import xprof
        return xprof.read
    what = {
        "sqlite": "a SQLite database (rocprofv3 rocpd input is not supported yet)",
        "rocprof-json": "rocprofv3 JSON (not supported yet)",
        "chrome-json": "a Chrome trace JSON (not supported yet; pass the .xplane.pb)",
        "json": "JSON of an unknown kind, not a trace format tracelens reads",
    }.get(fmt, "not a trace format tracelens reads (expected an XSpace .xplane.pb)")
    raise TraceInputError(path, what)


def load(paths: str | Path | Sequence[str | Path], rules: RuleSet | None = None,
         progress: Callable[[Iterable[Path]], Iterable[Path]] | None = None) -> Trace:
    """Read every trace behind ``paths`` into one classified Trace.

    Raises :class:`TraceInputError` for any input that cannot be read; nothing partial is
    returned.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for p in paths:
        files.extend(find_inputs(Path(p)))
    files = list(dict.fromkeys(files))
    readers = [(f, _reader_for(sniff_format(f), f)) for f in files]
    iterator = progress(files) if progress else files
    parts = []
    for f, (_, reader) in zip(iterator, readers):
        try:
            parts.append(reader(f))
        except TraceInputError:
            raise
        except Exception as exc:  # a file that breaks the reader is that file's problem
            raise TraceInputError(f, f"unreadable ({type(exc).__name__}: {exc})") from exc
    trace = combine(parts)
    trace.events, n_clipped, max_clip = clip_stream_overlaps(trace.events)
    if n_clipped:
        trace.meta.warn(f"clipped {n_clipped} same-stream overlaps (largest {max_clip} ns): "
                        "an in-order stream cannot run two activities at once")
    trace.events = classify(trace.events, rules)
    trace.events = assign_steps(trace.events, trace.steps)
    problems = validate(trace)
    if problems:  # a parser bug, not a user error: fail loudly
        raise AssertionError("trace violates the model: " + "; ".join(problems))
    return trace


def combine(parts: list[Trace]) -> Trace:
    """Join single-host traces into one job: ranks by host order, one clock.

    Hosts are aligned on wall-clock when every part knows its profile start time (XSpace
    ``Task Environment``); otherwise times are left as each file gives them and ``alignment``
    says "none".
    """
    if len(parts) == 1:
        parts[0].meta.alignment = "single host"
        return parts[0]
    meta = TraceMeta()
    starts: dict[int, int | None] = {}
    names: list[str] = []
    for i, part in enumerate(parts):
        meta.sources.extend(part.meta.sources)
        for w in part.meta.warnings:
            meta.warn(w)
        hosts = part.meta.extra.get("hosts", {})
        host, info = next(iter(hosts.items())) if hosts else (f"host{i}", {})
        starts[i] = info.get("profile_start_ns")
        names.append(host)
    dup = {n for n in names if names.count(n) > 1}
    aligned = all(s is not None for s in starts.values())
    t0 = min(s for s in starts.values() if s is not None) if aligned else 0
    meta.alignment = ("wall-clock (XSpace Task Environment profile_start_time)" if aligned
                      else "none")
    if not aligned:
        meta.warn("hosts could not be aligned on wall-clock (a file lacks profile_start_time); "
                  "cross-host timing is not comparable")
    out: dict[str, list[pl.DataFrame]] = {k: [] for k in ("events", "host_events", "steps",
                                                          "devices", "modules")}
    host_info = {}
    for i, part in enumerate(parts):
        host = names[i] if names[i] not in dup else f"{names[i]}#{i}"
        shift = (starts[i] - t0) if aligned else 0
        host_info[host] = {"rank": i, "path": part.meta.sources[0]["path"]}
        for key in out:
            df: pl.DataFrame = getattr(part, key)
            cols = {"rank": pl.lit(i, dtype=pl.Int32)}
            if "host" in df.columns:
                cols["host"] = pl.lit(host)
            if "start_ns" in df.columns:
                cols["start_ns"] = pl.col("start_ns") + shift
                cols["end_ns"] = pl.col("end_ns") + shift
            out[key].append(df.with_columns(**cols))
    meta.extra = {"hosts": host_info}
    return Trace(events=pl.concat(out["events"]), host_events=pl.concat(out["host_events"]),
                 steps=pl.concat(out["steps"]) if out["steps"] else pl.DataFrame(
                     schema=STEP_SCHEMA),
                 devices=pl.concat(out["devices"]), meta=meta,
                 modules=pl.concat(out["modules"]))
