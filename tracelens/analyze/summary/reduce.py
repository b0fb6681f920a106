"""The reduce of ``summarize``: one or more :class:`SummaryPartial` (parts of one job on one
clock, with distinct ranks) in, the typed :class:`~tracelens.results.summary.Summary` out.
Everything summed, ranked or taken the median of over devices is computed here, once."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import polars as pl

from tracelens.analyze.communication.collectives import analyze as analyze_collectives
from tracelens.analyze.compute.roofline import COVERAGE_FLOOR
from tracelens.analyze.summary.merge import concat_partials, lens_of
from tracelens.analyze.summary.types import SummaryOptions, SummaryPartial
from tracelens.analyze.timeline.breakdown import TIMELINE_COLUMNS
from tracelens.core.model import CATEGORIES, COMPUTE_CATEGORIES, DEVICE_KINDS
from tracelens.core.names import brief_name
from tracelens.analyze.summary.brief import category_efficiency, roofline_groups, step_spread
from tracelens.core.notices import NOTE_CODES, fold_per_host
from tracelens.loading.step_choice import headline_step, step_time_ns
from tracelens.results.collectives import Straggler
from tracelens.results.summary import (CategoryTime, DeviceKey, DeviceSummary, HardwareCount,
                                       Headline, NoFlops, RooflineRow, StepTotal, Summary,
                                       Timeline, TopKernel)
from tracelens.version import __version__

if TYPE_CHECKING:
    from tracelens.analyze.compute.hlo_findings import LensTimeline
    from tracelens.results.collectives import AxisTotals
    from tracelens.core.hardware import GpuSpec
    from tracelens.hlo.lens import Finding


def reduce_summary(partials: list[SummaryPartial], opts: SummaryOptions | None = None
                   ) -> Summary:
    """The Summary of ``partials`` (see the module doc); a single partial is the usual case
    (``summarize``), several are concatenated first
    (:func:`tracelens.analyze.summary.merge.concat_partials`)."""
    opts = opts or SummaryOptions()
    if not partials:
        raise ValueError("reduce_summary needs at least one partial")
    p = partials[0] if len(partials) == 1 else concat_partials(partials)
    p = _with_inferred_groups(p)
    devs = p.device_rows
    active = {d.key for d in devs}
    idle = tuple(DeviceKey(*k) for k in sorted((r["host"], r["rank"], r["device"])
                                               for r in p.devices.iter_rows(named=True))
                 if k not in active)
    headline = _headline(devs, idle, p.devices, p.steps, p.hosts_named)
    busy = headline.totals.busy_ns
    warnings = fold_per_host(n for n in p.notices if n.code not in NOTE_CODES)
    notes = fold_per_host(n for n in p.notices if n.code in NOTE_CODES)
    warnings += _coverage_warning(devs, p.gaps, headline.mfu is not None)
    coll = analyze_collectives(p.acts, p.alignment, top=opts.collectives_top, acts=p.acts)
    straggler = straggler_index(devs, coll.stragglers)
    return Summary(
        version=__version__, inputs=p.inputs, alignment=p.alignment,
        steps_source=p.steps_source, warnings=tuple(warnings), notes=tuple(notes),
        replays_graphs=any(n.code == "launch.graph_replays" for n in p.notices),
        filters=p.filters,
        headline=headline, devices=devs, idle_devices=idle,
        top_kernels=_top_kernels(p.kernels, p.kernel_ns, opts.top), collectives=coll,
        hlo_findings=_hlo_findings(lens_of(p)),
        roofline=tuple(_roofline_row(r) for r in p.roofline.head(opts.top)
                       .iter_rows(named=True)),
        no_cost_data=p.no_cost_data, no_cost_data_ns=p.no_cost_data_ns,
        no_flops=_no_flops_by_category(p.gaps, busy),
        category_totals=_category_totals(devs),
        step_totals=_step_totals(devs),
        device_roles=device_roles([d.timeline for d in devs], straggler),
        brief_roles=device_roles([d.timeline for d in devs], straggler, BRIEF_DEVICE_ROWS),
        step_spread=step_spread(devs), category_efficiency=category_efficiency(p.roofline),
        roofline_groups=roofline_groups(p.roofline, opts.top),
        median_shares=_median_shares(devs), specs=_specs_by_use(devs),
        axes=_axes(p))


def _with_inferred_groups(p: SummaryPartial) -> SummaryPartial:
    """``p`` with each collective instance's group inferred where the job records none
    (:func:`tracelens.analyze.communication.axes.with_inferred_groups`): its busbw and axis
    follow."""
    if p.acts.is_empty() or not p.world_sizes or "groups" not in p.acts.columns:
        return p
    from dataclasses import replace

    from tracelens.analyze.communication.axes import AxesOptions, with_inferred_groups, with_world

    hosts = p.acts.select("host").unique().with_columns(named=pl.lit(p.hosts_named))
    acts = with_inferred_groups(p.acts, p.devices, hosts, with_world(AxesOptions(),
                                                                      p.world_sizes))
    return replace(p, acts=acts)


def _axes(p: SummaryPartial) -> "tuple[AxisTotals, ...]":
    """Communication per mesh axis (inferred; ``tracelens axes`` takes a --mesh)."""
    from tracelens.analyze.communication.axes import AxesOptions, axis_totals

    if p.acts.is_empty() or "groups" not in p.acts.columns:
        return ()
    # text stays dictionary-encoded (tracelens.core.model.Text): decoding a million rows' strings
    # would cost what the reduce of many hosts can least afford, its memory
    hosts = p.acts.select("host").unique().with_columns(named=pl.lit(p.hosts_named))
    return axis_totals(p.acts, p.devices, hosts, AxesOptions())


def _hlo_findings(hlo: "LensTimeline | None", top: int = 3) -> "tuple[Finding, ...]":
    """The costliest ``tracelens hlo`` findings of the whole trace."""
    if hlo is None:
        return ()
    from tracelens.analyze.compute.hlo_findings import lens_of_timeline
    return lens_of_timeline(hlo).findings[:top]


def _share(ns: int, busy: int) -> float | None:
    return 100.0 * ns / busy if busy else None


def _no_flops_by_category(gaps: pl.DataFrame, busy: int) -> tuple[NoFlops, ...]:
    """Compute kernels without FLOPs per category: count, summed time, share of busy time."""
    if gaps.is_empty():
        return ()
    per = gaps.group_by("category").agg(pl.col("count").sum(), pl.col("sum_ns").sum()) \
        .sort(["sum_ns", "category"], descending=[True, False])
    return tuple(NoFlops(r["category"], int(r["count"]), int(r["sum_ns"]),
                         _share(int(r["sum_ns"]), busy)) for r in per.iter_rows(named=True))


def _coverage_warning(devs: tuple[DeviceSummary, ...], gaps: pl.DataFrame,
                      mfu_known: bool, top: int = 4) -> list[str]:
    """One warning when some device's FLOPs cover under 95% of its compute-kernel time: the
    categories and the longest kernels (short names, :func:`tracelens.core.names.brief_name`)
    without FLOPs with their reason (``cost_note``, in the reader's terms), the rest as
    "and N more". Shares are of compute-kernel time summed over streams, as the coverage is
    (a share of busy time, a union over streams, would pass 100% with concurrent kernels)."""
    low = [d for d in devs if d.flops_coverage is not None
           and d.flops_coverage < COVERAGE_FLOOR]
    if not low:
        return []
    # the lowest as the contract writes it (6 decimals), ties to the first device
    worst = min(low, key=lambda d: (round(d.flops_coverage, 6), d.rank, d.device))  # type: ignore
    total = sum(d.compute_kernel_ns for d in devs)
    covered = sum(d.flops_covered_ns for d in devs)

    def share(ns: int) -> str:
        return f"{round(100.0 * ns / total, 3) if total else 0:.1f}%"
    cats = ", ".join(f"{r['category']} {share(r['sum_ns'])}" for r in gaps.group_by(
        "category").agg(pl.col("sum_ns").sum()).sort(["sum_ns", "category"], descending=[
            True, False]).iter_rows(named=True))
    names = gaps.select(pl.col("op").unique())["op"]  # one short name per distinct op
    short = pl.DataFrame({"op": names, "_label": [brief_name(n) for n in names.to_list()]})
    ops = (gaps.join(short, on="op", how="left")
           .sort(["sum_ns", "op", "cost_note"], descending=[True, False, False], nulls_last=True)
           .group_by("_label", "category", maintain_order=True)
           .agg(pl.col("sum_ns").sum(), pl.col("cost_note").drop_nulls().first())
           .sort(["sum_ns", "_label", "category"], descending=[True, False, False]))
    by_note: dict[str, list[str]] = {}  # ops sharing a reason listed together, longest first
    for r in ops.head(top).iter_rows(named=True):
        by_note.setdefault(r["cost_note"] or "no reason recorded", []).append(
            f"{r['_label']} ({r['category']}, {share(r['sum_ns'])})")
    op_text = "; ".join(f"{', '.join(v)}: {k}" for k, v in by_note.items())
    rest = ops.slice(top)
    if rest.height:
        op_text += f"; and {rest.height} more ({rest['sum_ns'].sum() / 1e6:,.3f} ms)"
    worst_cov = round(worst.flops_coverage, 6)  # type: ignore[arg-type]
    return [f"FLOPs cover {100.0 * covered / total:.1f}% of compute-kernel time ({len(low)} "
            f"device(s) under {COVERAGE_FLOOR:.0%}, lowest {worst.host}/"
            f"{DEVICE_KINDS.get((worst.vendor or '').lower(), 'GPU')}{worst.device} "
            f"{100.0 * worst_cov:.1f}%), so MFU is "
            f"{'a lower bound' if mfu_known else 'unknown'}. Without FLOPs, as a share of "
            f"compute-kernel time (summed over streams): {cats}. Longest: {op_text}"]


def _lower_median(values: list[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    return known[(len(known) - 1) // 2] if known else None


def hardware_counts(devices: pl.DataFrame) -> tuple[HardwareCount, ...]:
    """How many devices of each (product, arch, vendor) a trace's device table holds, the
    most common first, ties by name: the headline's hardware, and each side's in ``compare``."""
    rows = devices.group_by("product", "arch", "vendor").len().sort(
        ["len", "product", "arch", "vendor"], descending=[True, False, False, False],
        nulls_last=True)
    return tuple(HardwareCount(r["product"], r["arch"], r["vendor"], r["len"])
                 for r in rows.iter_rows(named=True))


def _headline(devs: tuple[DeviceSummary, ...], idle: tuple[tuple[str, int, int], ...],
              devices: pl.DataFrame, steps: pl.DataFrame, hosts_named: bool = True
              ) -> Headline:
    tot = {k: sum(getattr(d.timeline, k) for d in devs) for k in TIMELINE_COLUMNS}
    span = tot["span_ns"]

    def pct(x: int) -> float | None:
        return 100.0 * x / span if span else None

    compute_ns = sum(d.compute_kernel_ns for d in devs)
    return Headline(
        hosts=len({d.host for d in devs} | {h for h, _, _ in idle}),
        devices=len(devs) + len(idle), active_devices=len(devs),
        hardware=hardware_counts(devices),
        steps=steps["step"].n_unique() if steps.height else 0,
        # the headline's step is one that ran (never an interpolation): the findings' too
        median_step_ns=step_time_ns(steps, headline_step(steps)),
        max_span_ns=max((d.timeline.span_ns for d in devs), default=0),
        busy_pct=pct(tot["busy_ns"]), compute_pct=pct(tot["compute_ns"]),
        exposed_comm_pct=pct(tot["exposed_comm_ns"]),
        exposed_memory_pct=pct(tot["exposed_memory_ns"]), idle_pct=pct(tot["idle_ns"]),
        # the median device's MFU (each device's median step's, else its span's, see
        # roofline.median_step_mfu); None when unknown
        mfu=_lower_median([d.mfu for d in devs]),
        mfu_lower_bound=any(d.mfu_lower_bound for d in devs),
        flops_coverage=sum(d.flops_covered_ns for d in devs) / compute_ns
        if compute_ns else None,
        totals=Timeline(**tot), mfu_basis="median step" if steps.height else "span",
        hosts_named=hosts_named)


def _top_kernels(kernels: pl.DataFrame, total: int, top: int) -> tuple[TopKernel, ...]:
    """The longest (name, category, subcategory, rule) groups over all devices."""
    if kernels.is_empty():
        return ()
    keys = ["name", "category", "subcategory", "rule"]
    agg = (kernels.group_by(keys).agg(pl.col("count").sum(), pl.col("sum_ns").sum(),
                                      devices=pl.len())
           .with_columns(pl.col(keys).cast(pl.String))
           .sort(["sum_ns", "name"], descending=[True, False]).head(top))
    return tuple(TopKernel(r["name"], r["category"], r["subcategory"], r["rule"],
                           int(r["count"]), int(r["sum_ns"]), r["sum_ns"] / r["count"],
                           100.0 * r["sum_ns"] / total if total else None, int(r["devices"]))
                 for r in agg.iter_rows(named=True))


def _roofline_row(r: Mapping[str, object]) -> RooflineRow:
    return RooflineRow(
        op=r["op"], program_id=r["program_id"], module=r["module"], kernel=r["kernel"],
        category=r["category"], dtype=r["dtype"], spec=r["spec"], count=int(r["count"]),
        sum_ns=int(r["sum_ns"]), flops=r["flops"], bytes=r["bytes"], intensity=r["intensity"],
        tflops_per_s=r["tflops_per_s"], tb_per_s=r["tb_per_s"],
        attainable_tflops_per_s=r["attainable_tflops_per_s"], bound=r["bound"],
        efficiency=r["efficiency"], no_cost_count=int(r["no_cost_count"]))


def _category_totals(devs: tuple[DeviceSummary, ...]) -> tuple[CategoryTime, ...]:
    """Categories summed over the reported devices, in exclusive-time order."""
    acc: dict[str, list[int]] = {}
    for d in devs:
        for c in d.categories:
            a = acc.setdefault(c.category, [0, 0, 0])
            a[0] += c.count
            a[1] += c.sum_ns
            a[2] += c.exclusive_ns
    rows = [CategoryTime(k, *v) for k, v in acc.items()]
    return tuple(sorted(rows, key=lambda r: (-r.exclusive_ns, CATEGORIES.index(r.category))))


def _specs_by_use(devs: tuple[DeviceSummary, ...]) -> tuple[GpuSpec, ...]:
    """The distinct specs (by name) of the devices, the most used first (ties: first seen)."""
    count: dict[str, int] = {}
    specs: dict[str, GpuSpec] = {}
    for d in devs:
        if d.spec is not None and d.spec.name:
            specs.setdefault(d.spec.name, d.spec)
            count[d.spec.name] = count.get(d.spec.name, 0) + 1
    return tuple(specs[n] for n in sorted(specs, key=lambda n: -count[n]))


def _step_totals(devs: tuple[DeviceSummary, ...]) -> tuple[StepTotal, ...]:
    """Each step's timeline summed over its devices, and their mean MFU."""
    acc: dict[int, list[Any]] = {}
    for d in devs:
        for st in d.steps:
            a = acc.setdefault(st.step, [0, {k: 0 for k in TIMELINE_COLUMNS}, []])
            a[0] += 1
            for k in TIMELINE_COLUMNS:
                a[1][k] += getattr(st.timeline, k)
            if st.mfu is not None and math.isfinite(st.mfu):
                a[2].append(st.mfu)
    return tuple(StepTotal(step, n, Timeline(**tot), sum(m) / len(m) if m else None)
                 for step, (n, tot, m) in sorted(acc.items()))


MAX_DEVICE_ROWS = 16
"""Beyond this many devices, per-device tables show the median, slowest and fastest device and
the outliers (``--all`` shows every row)."""

BRIEF_DEVICE_ROWS = 4
"""The short ``summarize`` lists every device up to this many, else the median,
slowest, fastest and outliers."""

OUTLIER_POINTS = 5.0
"""A device is an outlier when its share of compute, exposed communication, exposed memory or
idle time differs from the median device's by more than this many percentage points."""

_SHARES = ("compute_ns", "exposed_comm_ns", "exposed_memory_ns", "idle_ns")


def _shares(t: Timeline, cols: Sequence[str] = _SHARES) -> tuple[float, ...]:
    return tuple(100.0 * getattr(t, k) / t.span_ns if t.span_ns else 0.0 for k in cols)


def straggler_index(devs: Sequence[DeviceSummary], stragglers: Sequence[Straggler]
                    ) -> int | None:
    """Index in ``devs`` of the device that arrived last in most (over half) of its
    collectives (``stragglers``: the collectives report's rows, most last arrivals first);
    None without collective arrival data or without such a device."""
    if not stragglers:
        return None
    top = stragglers[0]
    if not top.instances or 2 * top.times_last <= top.instances:
        return None
    key = (top.host, top.rank, top.device)
    return next((i for i, d in enumerate(devs) if (d.host, d.rank, d.device) == key), None)


def device_roles(timelines: Sequence[Timeline], straggler: int | None = None,
                 limit: int = MAX_DEVICE_ROWS) -> tuple[tuple[str, int], ...]:
    """(role, index) rows for a per-device table: every device ("" role), or, past
    ``limit`` (MAX_DEVICE_ROWS), the median, slowest and fastest device and every outlier.

    Devices of one job wait for each other in exposed communication: the slowest is the one
    the others wait for, ``straggler`` (the last arrival in most collectives) when known, else
    the device with the smallest exposed-communication share (the least waiting; ties: the
    longest span, then position); the fastest the one waiting most (ties: the shortest span,
    then position), never the slowest. The median device is the median of the others by that
    waiting."""
    if len(timelines) <= limit:
        return tuple(("", i) for i in range(len(timelines)))
    shares = [_shares(t) for t in timelines]
    wait = [s[1] for s in shares]
    span = [t.span_ns for t in timelines]
    n = range(len(shares))
    slowest = straggler if straggler is not None else min(n, key=lambda i: (wait[i], -span[i], i))
    fastest = min((i for i in n if i != slowest), key=lambda i: (-wait[i], span[i], i))
    rest = sorted((i for i in n if i not in (slowest, fastest)), key=lambda i: (wait[i], i))
    med = rest[(len(rest) - 1) // 2]
    picks = {med: "median", slowest: "slowest", fastest: "fastest"}
    for i in n:
        if i not in picks and max(abs(a - b) for a, b in zip(shares[i], shares[med])) \
                > OUTLIER_POINTS:
            picks[i] = "outlier"
    rank = {"median": 0, "slowest": 1, "fastest": 2, "outlier": 3}
    return tuple((picks[i], i) for i in sorted(picks, key=lambda i: (rank[picks[i]], i)))


_HEAT = ("busy_ns", "compute_ns", "exposed_comm_ns", "exposed_memory_ns", "idle_ns")


def _median_shares(devs: tuple[DeviceSummary, ...]) -> dict[str, float]:
    """The median over devices of each timeline column's and each present compute category's
    exclusive share of the device's span (the report's heatmap centre)."""
    if len(devs) < 2:
        return {}
    present = [c for c in COMPUTE_CATEGORIES
               if any(x.category == c and x.count for d in devs for x in d.categories)]
    cols: dict[str, list[float]] = {k: [] for k in [*_HEAT, *[f"excl:{c}" for c in present]]}
    for d in devs:
        excl = {x.category: x.exclusive_ns for x in d.categories}
        span = d.timeline.span_ns
        for k, v in zip(_HEAT, _shares(d.timeline, _HEAT)):
            cols[k].append(v)
        for c in present:
            cols[f"excl:{c}"].append(100.0 * excl.get(c, 0) / span if span else 0.0)
    return {k: statistics.median(v) for k, v in cols.items()}
