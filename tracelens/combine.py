"""Joining the per-host (XSpace, Kineto) and per-process (rocprofv3) parts into one job.

Ranks: each part's own ranks, after those of the parts before it (an XSpace or Kineto file is
one rank, a rocprofv3 file one rank per process). Host names are kept, so several processes
of one host share it; two single-host files naming the same host become ``host#i``.
Clocks: XSpace hosts are aligned on wall-clock when every part knows its profile start time
(``Task Environment``); rocprofv3 processes of one host share its CLOCK_BOOTTIME and need no
shift, but rocprofv3 records no wall-clock time, so different hosts are left unaligned;
``meta.alignment`` says what was done and ``meta.unaligned`` what was not (the loader tries
collective ends before it warns).

:func:`place` decides all of that from the parts' metadata alone, so that the Dask engine
(:mod:`tracelens.engine`), whose workers keep each host's events, applies the same placement
to per-host partials that :func:`combine` applies to whole frames here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import polars as pl

from tracelens.model import STEP_SCHEMA, HostInfo, ProcessInfo, RankInfo, Trace, TraceMeta

_FRAMES = ("events", "host_events", "steps", "devices", "modules")


@dataclass(frozen=True)
class _Part:
    """What combining needs from one parser's output: its hosts, ranks and clock."""

    per_process: bool  # rocprofv3: one rank per process, on the host's CLOCK_BOOTTIME
    processes: tuple[ProcessInfo, ...]
    n_ranks: int
    hosts: tuple[str, ...]
    start: int | None  # wall-clock profile start (XSpace), else None
    clock: str | None


@dataclass(frozen=True)
class Placement:
    """Where one part goes in the job: ranks ``offset + local rank``; every row's host set to
    ``rename`` (None: a rocprofv3 part keeps its processes' host names); times + ``shift``."""

    offset: int
    rename: str | None
    shift: int


def _part(i: int, meta: TraceMeta) -> _Part:
    if meta.processes:
        procs = tuple(meta.processes)
        return _Part(True, procs, len(procs), tuple(p.host or f"host{i}" for p in procs),
                     None, meta.clock)
    host, info = next(iter(meta.hosts.items())) if meta.hosts else (f"host{i}", HostInfo())
    return _Part(False, (), 1, (host,), info.profile_start_ns, None)


def place(metas: Sequence[TraceMeta]) -> tuple[TraceMeta, list[Placement]]:
    """The job's metadata (sources, warnings, hosts, ranks, alignment, what stays unaligned)
    and each part's placement, from the parts' metadata. One part keeps its own metadata
    (alignment set) and is placed as it is."""
    infos = [_part(i, m) for i, m in enumerate(metas)]
    alignment, aligned, warning = _alignment(infos)
    if len(metas) == 1:
        metas[0].alignment = alignment
        metas[0].unaligned = warning
        return metas[0], [Placement(0, None, 0)]
    meta = TraceMeta()
    for m in metas:
        meta.sources.extend(m.sources)
        for w in m.warnings:
            meta.warn(w)
    meta.alignment = alignment
    single = [info.hosts[0] for info in infos if not info.per_process]
    dup = {n for n in single if single.count(n) > 1}
    starts = [info.start for info in infos]
    t0 = min(s for s in starts if s is not None) if aligned else 0
    placements: list[Placement] = []
    offset = 0
    for i, (m, info) in enumerate(zip(metas, infos)):
        rename = None
        if not info.per_process:
            rename = info.hosts[0] if info.hosts[0] not in dup else f"{info.hosts[0]}#{i}"
        shift = (starts[i] - t0) if aligned else 0  # type: ignore[operator]
        source = m.sources[0]
        for local in range(info.n_ranks):
            proc = info.processes[local] if info.per_process else None
            host = rename or (proc.host if proc else None) or f"host{i}"
            entry = meta.hosts.setdefault(host, HostInfo(path=source["path"]))
            entry.ranks.append(offset + local)
            entry.paths.append(source["path"])
            meta.ranks.append(RankInfo(rank=offset + local, host=host,
                                       pid=proc.pid if proc else None, path=source["path"],
                                       format=source.get("format")))
        placements.append(Placement(offset, rename, shift))
        offset += info.n_ranks
    meta.unaligned = warning
    return meta, placements


def placed(df: pl.DataFrame, where: Placement) -> pl.DataFrame:
    """One part's frame (any with a ``rank`` column) in the job: ranks, host, times."""
    cols = {"rank": (pl.col("rank") + where.offset).cast(pl.Int32)}
    if "host" in df.columns and where.rename is not None:
        cols["host"] = pl.lit(where.rename)
    if "start_ns" in df.columns and where.shift:
        cols["start_ns"] = pl.col("start_ns") + where.shift
        cols["end_ns"] = pl.col("end_ns") + where.shift
    return df.with_columns(**cols)


def combine(parts: list[Trace]) -> Trace:
    """One Trace of the whole job (see the module doc); a single part is returned as it is,
    with its alignment set."""
    meta, placements = place([part.meta for part in parts])
    if len(parts) == 1:
        return parts[0]
    out = {key: [placed(getattr(part, key), where) for part, where in zip(parts, placements)]
           for key in _FRAMES}
    return Trace(events=pl.concat(out["events"]), host_events=pl.concat(out["host_events"]),
                 steps=pl.concat(out["steps"]) if out["steps"] else pl.DataFrame(
                     schema=STEP_SCHEMA),
                 devices=pl.concat(out["devices"]), meta=meta,
                 modules=pl.concat(out["modules"]))


def _alignment(infos: list[_Part]) -> tuple[str, bool, str | None]:
    """(what ``meta.alignment`` says, whether XSpace wall-clock shifts apply, a warning)."""
    if all(not i.per_process for i in infos):
        if len(infos) == 1:
            return "single host", False, None
        if all(i.start is not None for i in infos):
            return "wall-clock (XSpace Task Environment profile_start_time)", True, None
        return "none", False, ("hosts could not be aligned on wall-clock (a file lacks "
                               "profile_start_time); cross-host timing is not comparable")
    hosts = {h for i in infos for h in i.hosts}
    if all(i.per_process for i in infos):
        clock = infos[0].clock or "the host clock"
        if len(hosts) == 1:
            n = sum(i.n_ranks for i in infos)
            return ("single host" if n == 1 else
                    f"single host: its {n} processes share {clock} (no shift)"), False, None
        return (f"none across hosts: rocprofv3 timestamps are each host's {clock} and carry "
                "no wall-clock time; processes on one host share it"), False, (
            f"{len(hosts)} hosts could not be aligned (rocprofv3 records no wall-clock time);"
            " cross-host timing is not comparable")
    return "none", False, ("hosts could not be aligned on wall-clock (XSpace and rocprofv3 "
                           "inputs mixed); cross-host timing is not comparable")
