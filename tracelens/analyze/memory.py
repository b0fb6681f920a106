"""Memory: each allocator's bytes in use over the profile, its peak (when, in which step, the
op that allocated last), what is live at the peak, the peak per step (docs/memory.md).

Read from the allocator events (``tracelens.core.model.MEMORY_SCHEMA``), the same way XProf's
``memory_profile`` reads XSpace ones: bytes in use = the allocator's heap (allocated) plus its
stack reservation after each event; the peak is the most of it, and among events at that
most, the last in the file's order (XProf's choice); the capacity is in use plus available at
the peak. A free is matched to the allocation at its address; an allocation is live at the
peak when no free of its address comes between it and the peak. The heap at the peak that no
live allocation of the profile accounts for was allocated before the profile began (or
without an event): ``unattributed_bytes``, never spread over ops.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import polars as pl

from tracelens.core.model import empty_memory
from tracelens.results.findings import RankedFinding
from tracelens.results.summary import DeviceSummary
from tracelens.results.memory import (DeviceMemory, LiveAllocation, MemoryChange, MemoryResult,
                                     StepPeak)

_DEVICE_NUMBER = re.compile(r"(?:^|[_:])(\d+)(?:$|_)")
_HOST_ALLOCATOR = re.compile(r"host|cpu|pinned", re.I)
FULL_PCT = 90.0  # a peak over this share of the capacity is a finding
TIMELINE_POINTS = 500  # the most points of an allocator's timeline (its JSON, the chart)
NO_EVENTS = ("no allocator events (XSpace MemoryAllocation/MemoryDeallocation, Kineto "
             "[memory]): nothing to say about its memory")


def allocator_device(allocator: str) -> int | None:
    """The device an allocator serves, from its name (``0``, ``GPU_0_bfc``, ``cuda:0``);
    None for host allocators (``xla_gpu_host_bfc``, ``cpu``) and names without a number."""
    if _HOST_ALLOCATOR.search(allocator):
        return None
    m = _DEVICE_NUMBER.search(allocator)
    return int(m.group(1)) if m else None


def read_memory_files(paths: Sequence[Path]
                      ) -> tuple[list[tuple[Path, pl.DataFrame]], list[str]]:
    """The allocator events of each trace file behind ``paths`` (as every command finds
    them) that has some, and one line per file that has none."""
    from tracelens.loading.formats import discover, read_memory_events

    parts, without = [], []
    for path in paths:
        found, _ = discover(path)
        for f in found:
            mem, why = read_memory_events(f)
            if mem.height:
                parts.append((f, mem))
            else:
                without.append(f"{f}: {why or NO_EVENTS}")
    return parts, without


def read_memory(paths: Sequence[Path]) -> tuple[pl.DataFrame, list[str]]:
    """:func:`read_memory_files`' events in one frame."""
    parts, without = read_memory_files(paths)
    return (pl.concat([m for _, m in parts]) if parts else empty_memory()), without


def merged(results: Sequence[MemoryResult], without: Sequence[str]) -> MemoryResult:
    """Several files' results as one (each file's allocators, on its own clock)."""
    return MemoryResult(devices=tuple(d for r in results for d in r.devices),
                        without=tuple(without),
                        start_ns=results[0].start_ns if len(results) == 1 else None,
                        findings=tuple(f for r in results for f in r.findings))


def analyze(mem: pl.DataFrame, steps: pl.DataFrame | None = None,
            devices: pl.DataFrame | None = None, without: Sequence[str] = (),
            top: int = 10, start_ns: int | None = None) -> MemoryResult:
    """Per (host, allocator) of ``mem``: peak, live allocations at it (the ``top`` largest
    groups), peak per step of ``steps`` (the windows of the device's rank; of the host's
    first rank for host memory). ``devices`` gives the ranks and, where the allocator does
    not say, the capacity (``memory_bytes``)."""
    out, without = [], list(without)
    for (host, alloc), ev in sorted(mem.group_by(["host", "allocator"]),
                                    key=lambda g: (str(g[0][0]), str(g[0][1]))):
        if ev["in_use"].is_null().all():  # no totals: no peak to tell, never a guessed one
            without.append(f"{host}: allocator {alloc}: {ev.height} events without the "
                           "allocator's bytes in use")
            continue
        out.append(_one(str(host), str(alloc), ev, steps, devices, top))
    return MemoryResult(devices=tuple(out), without=tuple(without), start_ns=start_ns,
                        findings=tuple(f for d in out if (f := full_finding(d)) is not None))


def _gib(b: int) -> str:
    return f"{b / 2**30:,.2f} GiB"


def full_finding(d: DeviceMemory) -> RankedFinding | None:
    """The finding of a device whose peak is over :data:`FULL_PCT` of its capacity: how much
    is left, and the group of live allocations holding the most at the peak."""
    if d.capacity_bytes is None or d.peak_pct_of_capacity is None or \
            d.peak_pct_of_capacity <= FULL_PCT:
        return None
    who = f"{d.host}/device {d.device}" if d.device is not None else f"{d.host}/host memory"
    most = d.most
    held = ("" if most is None else
            f"; the most at the peak: {most.count} × {most.shape or '?'} "
            f"({most.op or 'op unknown'}), {_gib(most.total_bytes)}")
    return RankedFinding(
        kind="memory_peak", target=f"{d.host}/{d.allocator}",
        title=f"Free memory on {who}: its peak is {d.peak_pct_of_capacity:.1f}% of its memory, "
              f"{_gib(d.capacity_bytes - d.peak_bytes)} left",
        saved_ns=None, saved_pct=None,
        evidence=f"{_gib(d.peak_bytes)} of {_gib(d.capacity_bytes)} in use"
                 + ("" if d.peak_step is None else f" in step {d.peak_step}") + held,
        command="tracelens memory",
        unprojected="memory: no step time to save; it bounds batch size, remat and sharding")


def memory_changes(base: MemoryResult, new: MemoryResult) -> tuple[MemoryChange, ...]:
    """Each allocator's peak in ``base`` and ``new``: matched by (host, allocator) where the
    runs name the same hosts, else by (the host's place among its run's sorted hosts,
    allocator); allocators in one run only are left out."""
    def keyed(r: MemoryResult) -> dict[tuple[object, str], DeviceMemory]:
        return {(d.host, d.allocator): d for d in r.devices}

    a, b = keyed(base), keyed(new)
    if {h for h, _ in a} != {h for h, _ in b}:
        def placed(r: MemoryResult) -> dict[tuple[object, str], DeviceMemory]:
            hosts = sorted({d.host for d in r.devices})
            return {(hosts.index(d.host), d.allocator): d for d in r.devices}
        a, b = placed(base), placed(new)
    out = []
    for key in sorted(set(a) & set(b), key=str):
        x, y = a[key], b[key]
        out.append(MemoryChange(
            host=y.host, allocator=y.allocator, device=y.device,
            base_peak_bytes=x.peak_bytes, new_peak_bytes=y.peak_bytes,
            delta_bytes=y.peak_bytes - x.peak_bytes,
            delta_pct=100.0 * (y.peak_bytes - x.peak_bytes) / x.peak_bytes
            if x.peak_bytes else None,
            base_pct_of_capacity=x.peak_pct_of_capacity,
            new_pct_of_capacity=y.peak_pct_of_capacity))
    return tuple(out)


def _windows(host: str, device: int | None, steps: pl.DataFrame | None,
             devices: pl.DataFrame | None) -> pl.DataFrame | None:
    """The step windows that apply to an allocator of ``host`` serving ``device``."""
    if steps is None or devices is None or steps.is_empty():
        return None
    here = devices.filter(pl.col("host").cast(pl.String) == host)
    if device is not None and (here["device"] == device).any():
        here = here.filter(pl.col("device") == device)
    if here.is_empty():
        return None
    rank = int(here["rank"].min())  # type: ignore[arg-type]
    win = steps.filter(pl.col("rank") == rank).select("step", "start_ns", "end_ns")
    return win.sort("start_ns") if win.height else None


def _step_of(times: pl.DataFrame, win: pl.DataFrame | None) -> pl.DataFrame:
    """``times`` with ``step``: the step whose window [start, end) holds ``time_ns``."""
    if win is None:
        return times.with_columns(step=pl.lit(None, pl.Int32))
    hit = (times.sort("time_ns")
           .join_asof(win, left_on="time_ns", right_on="start_ns", strategy="backward")
           .with_columns(step=pl.when(pl.col("time_ns") < pl.col("end_ns"))
                         .then(pl.col("step")).otherwise(None))
           .drop("start_ns", "end_ns"))
    return hit


def _capacity(host: str, device: int | None, peak: dict, devices: pl.DataFrame | None
              ) -> tuple[int | None, str | None, str | None]:
    """The allocator's size: in use + available where it says (XProf's capacity), else the
    device's memory as the file's device properties say (Kineto), else as the loaded
    trace's devices say (its own row, or the one size every device of the host has)."""
    if peak["free_bytes"] is not None and peak["in_use"] is not None:
        return peak["in_use"] + peak["free_bytes"], "allocator", None
    if device is None:
        return None, None, "host memory: its size is not in the trace"
    if peak["capacity_bytes"] is not None:
        return int(peak["capacity_bytes"]), "device properties", None
    if devices is not None and "memory_bytes" in devices.columns:
        here = devices.filter(pl.col("host").cast(pl.String) == host)
        own = here.filter(pl.col("device") == device)
        sizes = (own if own.height else here)["memory_bytes"].drop_nulls().unique()
        if sizes.len() == 1:
            return int(sizes[0]), "device properties", None
    return None, None, "neither the allocator nor the device's properties give its size"


def _live(r: dict) -> LiveAllocation:
    return LiveAllocation(
        allocation_bytes=r["allocation_bytes"], count=r["count"], total_bytes=r["total_bytes"],
        requested_bytes=r["requested_bytes"], op=r["op"], shape=r["shape"], dtype=r["dtype"],
        region=r["region"], first_time_ns=r["first_time_ns"], step=r["step"])


def _one(host: str, alloc: str, ev: pl.DataFrame, steps: pl.DataFrame | None,
         devices: pl.DataFrame | None, top: int) -> DeviceMemory:
    device = allocator_device(alloc)
    win = _windows(host, device, steps, devices)
    ev = _step_of(ev.sort(["time_ns", "seq"]), win).sort(["time_ns", "seq"])
    ev = ev.with_row_index("pos")
    known = ev.filter(pl.col("in_use").is_not_null())
    top_bytes = known["in_use"].max()
    peak = known.filter(pl.col("in_use") == top_bytes).sort("seq").row(-1, named=True)
    upto = ev.filter(pl.col("pos") <= peak["pos"])
    last_alloc = upto.filter(pl.col("kind") == "alloc").tail(1)
    # live at the peak: per address, the last event up to the peak is an allocation
    live = (upto.filter(pl.col("address").is_not_null())
            .group_by(["address"]).agg(pl.all().sort_by("pos").last())
            .filter(pl.col("kind") == "alloc"))
    live_bytes = int(live["allocation_bytes"].sum() or 0)
    groups = (live.group_by(["allocation_bytes", "requested_bytes", "op", "shape", "dtype",
                             "region"])
              .agg(count=pl.len(), first_time_ns=pl.col("time_ns").min(),
                   step=pl.col("step").sort_by("time_ns").first())
              .with_columns(total_bytes=pl.col("allocation_bytes") * pl.col("count"))
              .sort(["allocation_bytes", "count", "op", "shape"],
                    descending=[True, True, False, False], nulls_last=True))
    per_step = (known.filter(pl.col("step").is_not_null())
                .sort("pos").group_by("step", maintain_order=True)
                .agg(peak=pl.col("in_use").max(),
                     time=pl.col("time_ns").filter(pl.col("in_use") == pl.col("in_use").max())
                     .first())
                .sort("step"))
    cap, source, note = _capacity(host, device, peak, devices)
    heap = peak["heap_bytes"]
    reserved = peak["reserved_bytes"]
    return DeviceMemory(
        host=host, allocator=alloc, device=device, events=ev.height,
        capacity_bytes=cap, capacity_source=source, capacity_note=note,
        peak_bytes=int(top_bytes), peak_time_ns=peak["time_ns"], peak_step=peak["step"],
        peak_op=last_alloc["op"][0] if last_alloc.height else None,
        peak_pct_of_capacity=100.0 * int(top_bytes) / cap if cap else None,
        heap_bytes=heap, stack_bytes=peak["stack_bytes"], reserved_bytes=reserved,
        cached_free_bytes=reserved - heap if reserved is not None and heap is not None
        and reserved >= heap else None,
        fragmentation=peak["fragmentation"], lifetime_peak_bytes=peak["peak_lifetime"],
        live_count=live.height, live_bytes=live_bytes,
        unattributed_bytes=heap - live_bytes if heap is not None else None,
        live=tuple(_live(r) for r in groups.head(top).iter_rows(named=True)),
        most=_live(groups.sort(["total_bytes", "allocation_bytes"], descending=True).row(
            0, named=True)) if groups.height else None,
        steps=tuple(StepPeak(int(r["step"]), int(r["peak"]), int(r["time"]))
                    for r in per_step.iter_rows(named=True)),
        timeline=_timeline(known))


def _timeline(known: pl.DataFrame) -> tuple[tuple[int, int], ...]:
    """Bytes in use after each event; past :data:`TIMELINE_POINTS` events, the most of each
    of that many runs of consecutive events (the first time it is reached), so no peak is
    smoothed away."""
    ev = known.sort("pos").select("time_ns", "in_use")
    n = ev.height
    if n > TIMELINE_POINTS:
        ev = (ev.with_row_index("i")
              .with_columns(run=(pl.col("i") * TIMELINE_POINTS // n))
              .group_by("run", maintain_order=True)
              .agg(pl.col("time_ns").get(pl.col("in_use").arg_max()), pl.col("in_use").max())
              .select("time_ns", "in_use"))
    return tuple((int(t), int(b)) for t, b in ev.iter_rows())


def summary_frames(devices: Sequence[DeviceSummary]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The step windows and devices of a ``summarize`` result, as :func:`analyze` takes
    them (the summary's engine path loads no trace here)."""
    steps = pl.DataFrame([(d.rank, s.step, s.start_ns, s.end_ns) for d in devices
                          for s in d.steps],
                         schema={"rank": pl.Int32, "step": pl.Int32, "start_ns": pl.Int64,
                                 "end_ns": pl.Int64}, orient="row").unique(["rank", "step"])
    devs = pl.DataFrame([(d.host, d.rank, d.device) for d in devices],
                        schema={"host": pl.String, "rank": pl.Int32, "device": pl.Int32},
                        orient="row")
    return steps, devs
