"""Whether the files a command was given are one job (README, "One job").

``tracelens summarize folder/`` used to merge whatever trace files the folder held into one
"job" (24 MI355X, 8 H100 and 8 MI300X on 5 hosts, with an MFU). Files are one job only when
nothing says otherwise; they are different jobs when:

- they sit in different run folders of one directory argument (an XProf log directory's
  ``plugins/profile/<run>/``; for rocprofv3, the folder above ``<hostname>/`` when the file
  sits in a folder named after the host it records; else the file's own folder), unless
  they are two processes of one job recorded at once: different processes (XSpace: host
  and ``process_id``) with a shared program and overlapping windows on the wall clock, or
  different ranks of one Kineto ``distributedInfo`` world whose windows are not disjoint.
  That is how real jobs are laid out: a log directory per process or rank, and hosts that
  named their run folder after a clock a second apart;
- their devices are of different kinds (product, else arch) and they share no program
  (same module name and byte-identical HLO);
- their time windows are disjoint on a clock both share (XSpace: wall-clock from each
  file's profile start; rocprofv3: processes of one host, from their start and end times);
- different profilers wrote them (XSpace, Kineto, rocprofv3 in any of its forms,
  rpd_tracer): each records the device activity itself, so together they are unrelated jobs
  or the same kernels twice. A file of unknown device kind and clock used to join any group
  (a Kineto MI250 trace and a rocprofv3 CSV linked two unrelated XSpace jobs into one).

The jobs are the groups of files connected by "not different"; more than one group is
refused (exit 2) with the list of groups, so the user can pass the job they mean.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from tracelens.loading.combine import host_clock
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Trace


@dataclass(frozen=True)
class Facts:
    """What the job check needs from one file's parsed trace."""

    path: Path
    arg: int                                # which path argument it came from
    run: Path | None                        # its run folder (files found in a directory)
    kinds: frozenset[str]                   # device kinds; empty when unknown
    programs: frozenset[tuple[str, str]]    # (module, sha256 of its HLO)
    clock: str | None                       # a clock the window is on ("wall", "boot:<host>")
    window: tuple[int, int] | None
    hardware: tuple[tuple[str, int], ...]   # (device kind, count), for the message
    # which process wrote the file: XSpace (host, process_id or None), Kineto ("rank", N)
    member: tuple[str, int | None] | None = None
    world: int | None = None                # Kineto distributedInfo world size
    recorder: str | None = None             # which profiler wrote it (:func:`recorder`)


# Each profiler records the device activity itself: two of them in one job would count every
# kernel twice, so files of different recorders are different jobs (rocprofv3's outputs of one
# job's processes may come in different forms: one recorder).
RECORDERS = {"xspace": "xspace", "kineto": "kineto", "rocprof-json": "rocprofv3",
             "rocprof-csv": "rocprofv3", "rocpd": "rocprofv3", "rpd": "rpd_tracer"}


def recorder(part: Trace) -> str | None:
    """The profiler that wrote ``part`` (None: not known, or several: a combined trace)."""
    found = {RECORDERS.get(str(s.get("format"))) for s in part.meta.sources}
    return found.pop() if len(found) == 1 else None


def facts(part: Trace, path: Path, arg: int, in_dir: bool) -> Facts:
    """The facts of one parsed file; ``in_dir``: it was found inside a directory argument."""
    devs = part.devices.select(kind=pl.coalesce("product", "arch"))["kind"]
    kinds = frozenset(k for k in devs.to_list() if k)
    hardware = tuple(devs.fill_null("unknown device").value_counts(name="n").iter_rows())
    programs = frozenset(
        (m or "", hashlib.sha256(h).hexdigest()) for m, h in
        part.modules.select("module", "hlo_proto").iter_rows() if h is not None)
    clocked = host_clock(part.meta)
    processes = clocked.processes if clocked is not None else ()
    clock, window = None, None
    if processes:  # rocprofv3: the processes' lifetimes on their host's boot clock
        host = processes[0].host
        inits = [p.init_ns for p in processes if p.init_ns is not None]
        finis = [p.fini_ns for p in processes if p.fini_ns is not None]
        if host and len(inits) == len(finis) == len(processes):
            clock, window = f"boot:{host}", (min(inits), max(finis))
        run_host = host
    else:  # XSpace: events are relative to the profile start (wall-clock ns)
        first = next(iter(part.meta.hosts.values()), None)
        start = first.profile_start_ns if first is not None else None
        last = part.events["end_ns"].max()
        if start is not None and last is not None:
            clock, window = "wall", (int(start), int(start) + int(last))  # type: ignore
        run_host = None
    run = None
    if in_dir:
        run = path.parent
        if run_host and run.name == run_host:
            run = run.parent
    member, world = _member(part)
    return Facts(path, arg, run, kinds, programs, clock, window, hardware, member, world,
                 recorder(part))


def _member(part: Trace) -> tuple[tuple[str, int | None] | None, int | None]:
    """Which process of a job wrote this file, and the Kineto world size (None: unknown)."""
    member = part.meta.member
    if member is not None:  # the file states its place by rank (Kineto)
        if member.rank is not None and member.world_size is not None and member.world_size > 1:
            return ("rank", member.rank), member.world_size
        return None, None
    if host_clock(part.meta) is not None or len(part.meta.hosts) != 1:
        return None, None  # rocprofv3 (its run folder knows hosts) or an already combined trace
    host, info = next(iter(part.meta.hosts.items()))
    return (host, info.pid), None


def _disjoint(a: Facts, b: Facts) -> bool:
    if a.clock is not None and a.clock == b.clock and a.window and b.window:
        return a.window[1] < b.window[0] or b.window[1] < a.window[0]
    return False


def _recorded_together(a: Facts, b: Facts) -> bool:
    """Two processes of one job, each with its own run folder (see the module docstring)."""
    if a.member is None or b.member is None or a.member == b.member:
        return False
    if a.world is not None or b.world is not None:
        return a.world == b.world and not _disjoint(a, b)
    return bool(a.programs & b.programs) and a.clock == "wall" == b.clock \
        and a.window is not None and b.window is not None and not _disjoint(a, b)


def _different(a: Facts, b: Facts) -> bool:
    if a.recorder is not None and b.recorder is not None and a.recorder != b.recorder:
        return True  # a file of each profiler: unrelated, or the same kernels twice
    if a.arg == b.arg and a.run is not None and b.run is not None and a.run != b.run \
            and not _recorded_together(a, b):
        return True
    if a.kinds and b.kinds and not a.kinds & b.kinds and not a.programs & b.programs:
        return True
    return _disjoint(a, b)


def check_one_job(items: list[Facts], args: list[Path]) -> None:
    """Raise :class:`TraceInputError` listing the jobs when ``items`` are not one job."""
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if not _different(items[i], items[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[Facts]] = {}
    for i, f in enumerate(items):
        groups.setdefault(root(i), []).append(f)
    if len(groups) < 2:
        return
    jobs = sorted(groups.values(), key=lambda g: min(str(f.path) for f in g))
    listed = "; ".join(f"{k}) {_describe(g, args)}" for k, g in enumerate(jobs, 1))
    where = args[0] if len(args) == 1 else Path(", ".join(str(a) for a in args))
    raise TraceInputError(where, f"holds {len(jobs)} jobs, not one (different run folders, "
                          "device kinds without a shared program, or disjoint time "
                          f"windows): {listed}; pass one job's files")


def _describe(group: list[Facts], args: list[Path]) -> str:
    """``folder/{a, b} (16× MI355X)``: the files (relative to their directory argument)
    grouped by folder, and the devices they hold."""
    folders: dict[Path, list[str]] = {}
    for f in sorted(group, key=lambda f: str(f.path)):
        base = args[f.arg]
        rel = f.path.relative_to(base) if base.is_dir() and f.path.is_relative_to(base) \
            else f.path
        folders.setdefault(rel.parent, []).append(rel.name)
    names = [", ".join(n) if folder == Path(".") else
             f"{folder}/{n[0]}" if len(n) == 1 else f"{folder}/{{{', '.join(n)}}}"
             for folder, n in folders.items()]
    count: Counter[str] = Counter()
    for f in group:
        for kind, n in f.hardware:
            count[kind] += n
    hw = ", ".join(f"{n}× {k}" for k, n in sorted(count.items(), key=lambda r: (-r[1], r[0])))
    return f"{', '.join(names)} ({hw or 'no devices'})"
