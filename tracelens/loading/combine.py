"""Joining the per-host (XSpace, Kineto) and per-process (rocprofv3) parts into one job.

Ranks: each part's own ranks, after those of the parts before it (an XSpace or Kineto file is
one rank, a rocprofv3 file one rank per process). Host names are kept, so several processes
of one host share it; two single-host files naming the same host become ``host#i``.
Clocks: XSpace hosts are aligned on wall-clock when every part knows its profile start time
(``Task Environment``); rocprofv3 processes of one host share its CLOCK_BOOTTIME and need no
shift, but rocprofv3 records no wall-clock time, so different hosts are left unaligned;
``meta.alignment`` says what was done and ``meta.unaligned`` what was not (the loader tries
collective ends before it warns).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from tracelens.core.model import (STEP_SCHEMA, HostClockFacts, HostInfo, Membership, Notice,
                             ProcessInfo, RankInfo, Trace, TraceMeta)
from tracelens.core.notices import unique

_FRAMES = ("events", "host_events", "steps", "devices", "modules")


@dataclass(frozen=True)
class PartFacts:
    """What combining needs from one parser's output: its hosts, ranks and clock (small and
    picklable: per-host partials carry it so they can be placed like whole parts)."""

    per_process: bool  # rocprofv3: one rank per process, on the host's CLOCK_BOOTTIME
    processes: tuple[ProcessInfo, ...]
    n_ranks: int
    hosts: tuple[str | None, ...]  # None: the file names no host (``host<i>`` by position)
    start: int | None  # wall-clock profile start (XSpace), else None
    clock: str | None


def part_facts(meta: TraceMeta) -> PartFacts:
    """The :class:`PartFacts` of one file's trace."""
    clocked = host_clock(meta)
    if clocked is not None:
        procs = clocked.processes
        return PartFacts(True, procs, len(procs), tuple(p.host for p in procs), None,
                         clocked.clock)
    host, info = next(iter(meta.hosts.items())) if meta.hosts else (None, HostInfo())
    return PartFacts(False, (), 1, (host,), info.profile_start_ns, None)


def host_clock(meta: TraceMeta) -> HostClockFacts | None:
    """What a file holding several processes on one host clock says of them (rocprofv3,
    RPD), None for any other file (one meta per file)."""
    return next((f for f in meta.facts(HostClockFacts) if f.processes), None)


def _named(i: int, f: PartFacts) -> PartFacts:
    """Unnamed hosts named by the part's position, as the job sees them."""
    return replace(f, hosts=tuple(h or f"host{i}" for h in f.hosts))


@dataclass(frozen=True)
class Placement:
    """Where one part goes in the job: its first rank, the host name its rows get (None:
    keep theirs, as rocprofv3 processes and a lone part do) and the ns added to its times."""

    rank_offset: int
    host: str | None
    shift_ns: int


@dataclass(frozen=True)
class Plan:
    """How parts combine (the module doc): each part's placement, what ``meta.alignment``
    says and the warning when hosts are left unaligned."""

    placements: tuple[Placement, ...]
    alignment: str
    unaligned: Notice | None


def plan(metas: list[TraceMeta]) -> Plan:
    """The :class:`Plan` for parts with these metas, in order: all :func:`combine` reads of
    a part besides its frames (so per-host partials can be joined the same way)."""
    return plan_facts([part_facts(m) for m in metas])


def plan_facts(facts: list[PartFacts]) -> Plan:
    """:func:`plan` from each part's :class:`PartFacts`, in order."""
    infos = [_named(i, f) for i, f in enumerate(facts)]
    alignment, aligned, warning = _alignment(infos)
    if len(infos) == 1:
        return Plan((Placement(0, None, 0),), alignment, warning)
    single = [info.hosts[0] for info in infos if not info.per_process]
    dup = {n for n in single if single.count(n) > 1}
    starts = [info.start for info in infos]
    t0 = min(s for s in starts if s is not None) if aligned else 0
    out, offset = [], 0
    for i, info in enumerate(infos):
        rename = None
        if not info.per_process:
            rename = info.hosts[0] if info.hosts[0] not in dup else f"{info.hosts[0]}#{i}"
        shift = (starts[i] - t0) if aligned else 0  # type: ignore[operator]
        out.append(Placement(offset, rename, shift))
        offset += info.n_ranks
    return Plan(tuple(out), alignment, warning)


def place(df: pl.DataFrame, where: Placement) -> pl.DataFrame:
    """One part's frame moved to its place in the job: ranks offset, host renamed, times
    shifted (only the columns it has)."""
    cols = {"rank": (pl.col("rank") + where.rank_offset).cast(pl.Int32)}
    if "host" in df.columns and where.host is not None:
        cols["host"] = pl.lit(where.host, dtype=df.schema["host"])
    if "start_ns" in df.columns:
        cols["start_ns"] = pl.col("start_ns") + where.shift_ns
        cols["end_ns"] = pl.col("end_ns") + where.shift_ns
    return df.with_columns(**cols)


def combine(parts: list[Trace]) -> Trace:
    """One Trace of the whole job (see the module doc); a single part is returned as it is,
    with its alignment set."""
    how = plan([part.meta for part in parts])
    if len(parts) == 1:
        parts[0].meta.alignment = how.alignment
        parts[0].meta.unaligned = how.unaligned
        return parts[0]
    out = {key: [place(getattr(part, key), where) for part, where in zip(parts, how.placements)]
           for key in _FRAMES}
    return Trace(events=pl.concat(out["events"]), host_events=pl.concat(out["host_events"]),
                 steps=pl.concat(out["steps"]) if out["steps"] else pl.DataFrame(
                     schema=STEP_SCHEMA),
                 devices=pl.concat(out["devices"]), meta=job_meta([p.meta for p in parts], how),
                 modules=pl.concat(out["modules"]))


def job_meta(metas: list[TraceMeta], how: Plan) -> TraceMeta:
    """The metadata of several parts joined by ``how``: their sources and notices (once
    each, in order), hosts and ranks where the plan puts them, its alignment (the engine
    builds a job's metadata from its hosts' metas with this too)."""
    meta = TraceMeta(notices=unique(n for m in metas for n in m.notices))
    for m in metas:
        meta.sources.extend(m.sources)
    meta.alignment = how.alignment
    for i, (m, where) in enumerate(zip(metas, how.placements)):
        info = _named(i, part_facts(m))
        source = m.sources[0]
        named = all(h.named for h in m.hosts.values())
        for local in range(info.n_ranks):
            proc = info.processes[local] if info.per_process else None
            host = where.host or (proc.host if proc else None) or f"host{i}"
            rank = where.rank_offset + local
            entry = meta.hosts.setdefault(host, HostInfo(path=source["path"], named=named))
            entry.ranks.append(rank)
            entry.paths.append(source["path"])
            meta.ranks.append(RankInfo(rank=rank, host=host, pid=proc.pid if proc else None,
                                       path=source["path"], format=source.get("format")))
    meta.unaligned = how.unaligned
    # the job's world size, where its files state one and agree (no rank: it is the job's)
    worlds = {m.member.world_size for m in metas if m.member is not None}
    if len(worlds) == 1 and None not in worlds:
        meta.member = Membership(rank=None, world_size=worlds.pop())
    return meta


def _alignment(infos: list[PartFacts]) -> tuple[str, bool, Notice | None]:
    """(what ``meta.alignment`` says, whether XSpace wall-clock shifts apply, a notice)."""
    if all(not i.per_process for i in infos):
        if len(infos) == 1:
            return "single host", False, None
        if all(i.start is not None for i in infos):
            return "wall-clock (XSpace Task Environment profile_start_time)", True, None
        return "none", False, Notice.of(
            "align.no_profile_start", "hosts could not be aligned on wall-clock (a file lacks "
            "profile_start_time); cross-host timing is not comparable")
    hosts = {h for i in infos for h in i.hosts}
    if all(i.per_process for i in infos):
        clock = infos[0].clock or "the host clock"
        if len(hosts) == 1:
            n = sum(i.n_ranks for i in infos)
            return ("single host" if n == 1 else
                    f"single host: its {n} processes share {clock} (no shift)"), False, None
        return (f"none across hosts: rocprofv3 timestamps are each host's {clock} and carry "
                "no wall-clock time; processes on one host share it"), False, Notice.of(
            "align.no_wall_clock", "{n_hosts} hosts could not be aligned (rocprofv3 records no "
            "wall-clock time); cross-host timing is not comparable", n_hosts=len(hosts))
    return "none", False, Notice.of(
        "align.mixed_inputs", "hosts could not be aligned on wall-clock (XSpace and rocprofv3 "
        "inputs mixed); cross-host timing is not comparable")
