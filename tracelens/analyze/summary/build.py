"""``summarize`` as a map and a reduce: :func:`summary_partial` computes everything that is
per device (timelines, categories, steps, idle parts, MFU, FLOPs coverage) and small mergeable
frames (kernel and roofline group sums, FLOPs gaps, collective activities) from one trace;
:func:`reduce_summary` turns one or more partials into the typed
:class:`~tracelens.results.summary.Summary` (headline, top kernels, roofline, collectives,
warnings). ``summarize(trace)`` is ``reduce_summary([summary_partial(trace)])``; partials of
separately loaded hosts are joined by :func:`tracelens.analyze.summary.merge.merge_partials`.
"""

from __future__ import annotations

from pathlib import Path
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping, Sequence

import polars as pl

from tracelens.analyze.communication.collectives import partial_activities
from tracelens.analyze.critical.path import CriticalPart, CriticalPath, CriticalPathOptions
from tracelens.analyze.summary.packed import is_packed, pack_summary, unpack_summary
from tracelens.analyze.timeline.idle import IDLE_PARTS, idle_breakdowns
from tracelens.analyze.compute import kernel_table as kt
from tracelens.analyze.compute.roofline import (COVERAGE_FLOOR, clip_costs_to_windows, device_mfu,
                                        device_specs, mfu, model_kernels, roofline, spec_frame)
from tracelens.analyze.summary.merge import file_facts
from tracelens.analyze.summary.reduce import reduce_summary
from tracelens.analyze.summary.types import SummaryOptions, SummaryPartial
from tracelens.analyze.timeline.breakdown import (DEVICE_KEYS, TIMELINE_COLUMNS, Axis, Breakdown,
                                        device_and_step_breakdowns, device_axis,
                                        step_breakdown, step_rows)
from tracelens.loading.filters import Filters
from tracelens.core.frames import distinct
from tracelens.results.filters import ActiveFilters, SummaryFilters
from tracelens.core.hardware import GpuSpec, load_specs_file
from tracelens.core.model import Trace, world_sizes
from tracelens.core.notices import steps_disagree
from tracelens.engine.protocol import JobPlan
from tracelens.results.critical_path import CriticalPathResult
if TYPE_CHECKING:
    from tracelens.analyze.compute.hlo_findings import LensTimeline
from tracelens.results.summary import (CategoryTime, CriticalPathLines, DeviceSummary,
                                       IdleBreakdown, StepSummary, Summary, Timeline)

__all__ = ["SummaryOptions", "SummaryPartial", "reduce_summary", "summarize",
           "summary_partial"]


def summarize(trace: Trace, device: int | None = None, step: int | None = None,
              top: int = 10, gpu: str | None = None,
              gpu_specs: str | Path | dict[str, GpuSpec] | None = None,
              filters: Filters | None = None) -> Summary:
    """Headline, per-device timeline and categories, per-step timelines, top kernels,
    roofline per op group, MFU per device and step, collectives (see
    :class:`SummaryOptions` for the arguments; ``gpu_specs`` may be a TOML/JSON file)."""
    from tracelens.engine.protocol import run_trace

    return run_trace(SummaryAnalysis(), trace, options(device, step, top, gpu, gpu_specs,
                                                        filters))


def options(device: int | None = None, step: int | None = None, top: int = 10,
            gpu: str | None = None, gpu_specs: str | Path | dict[str, GpuSpec] | None = None,
            filters: Filters | None = None) -> SummaryOptions:
    """:class:`SummaryOptions`, with a specs file loaded."""
    extra = load_specs_file(gpu_specs) if isinstance(gpu_specs, (str, Path)) else gpu_specs
    return SummaryOptions(device=device, step=step, top=top, gpu=gpu, gpu_specs=extra,
                          filters=filters)


def _select(trace: Trace, device: int | None, step: int | None) -> tuple[pl.DataFrame,
                                                                          pl.DataFrame]:
    events, steps = trace.events, trace.steps
    if device is not None:
        events = events.filter(pl.col("device") == device)
    if step is not None:
        steps = steps.filter(pl.col("step") == step)
        events = clip_costs_to_windows(events, steps) if steps.height else events.head(0)
    return events, steps


def summary_partial(trace: Trace, opts: SummaryOptions | None = None) -> SummaryPartial:
    """The per-device results and mergeable frames of ``trace`` under ``opts``."""
    from tracelens.loading.filters import apply

    opts = opts or SummaryOptions()

    active_filters = ActiveFilters()
    if opts.filters is not None and opts.filters.active():
        trace, active_filters = apply(trace, opts.filters), opts.filters.active()
    device, step = opts.device, opts.step
    events, steps = _select(trace, device, step)
    unfiltered = events is trace.events
    # the whole trace's collective activities, computed once for the collectives (when no
    # filter narrows the events) and the HLO findings (always the whole trace)
    # one sort of the selected events per device, shared by the collectives' compute
    # segments, the device breakdown, the idle gaps and the MFU spans (not for one step:
    # those passes read the step's clipped events)
    axis = device_axis(events) if step is None and events.height else None
    whole_acts = partial_activities(trace.events, axis if unfiltered else None) \
        if unfiltered or trace.modules.height else None
    acts = whole_acts if unfiltered else partial_activities(events, axis)
    devices = trace.devices
    if device is not None:
        devices = devices.filter(pl.col("device") == device)
    specs = device_specs(devices, gpu=opts.gpu, extra=opts.gpu_specs)
    specs_df = spec_frame(specs)
    # the one pass over the events for every per-kernel sum (kernel_table's module doc)
    table = kt.kernel_table(events)
    n_nocost, ns_nocost, total_ns = kt.no_cost_sums(table)
    roof = kt.roofline_of(table, specs_df)
    return SummaryPartial(
        inputs=tuple(trace.meta.sources), notices=tuple(trace.meta.notices),
        alignment=trace.meta.alignment,
        steps_source=trace.meta.steps_source,
        filters=SummaryFilters(device, step, active_filters),
        devices=devices, steps=steps,
        device_rows=_device_rows(trace, events, steps, devices, specs, specs_df, device, step,
                                 axis, table),
        kernels=kt.kernel_groups(table), kernel_ns=total_ns, specs=specs_df,
        roofline=roofline(events, specs_df) if roof is None else roof,
        roofline_mix=kt.roofline_mix(table, specs_df), gaps=kt.without_flops(table),
        no_cost_data=n_nocost, no_cost_data_ns=ns_nocost,
        acts=acts,
        # the HLO findings are of the whole trace (filters do not apply)
        hlo=_lens(trace, whole_acts, unfiltered) if trace.modules.height else None,
        host_facts=file_facts(trace) if len(trace.meta.sources) == 1 else None,
        hosts_named=all(h.named for h in trace.meta.hosts.values()),
        world_sizes=world_sizes([trace.meta]),
    )


def _device_rows(trace: Trace, events: pl.DataFrame, steps: pl.DataFrame,
                 devices: pl.DataFrame, specs: dict[tuple, GpuSpec | None],
                 specs_df: pl.DataFrame, device: int | None, step: int | None,
                 axis: Axis | None, table: pl.DataFrame) -> tuple[DeviceSummary, ...]:
    """One typed row per active device, in (rank, device) order; ``axis``: the
    :func:`device_axis` of ``events`` (None with a step, or when it does not fit);
    ``table``: their :func:`~tracelens.analyze.compute.kernel_table.kernel_table`."""
    active = axis[1].select(DEVICE_KEYS) if axis is not None else \
        distinct(events, DEVICE_KEYS)
    inside = None  # every activity inside one step window or outside all (step_rows)
    if step is not None:
        per_step = step_breakdown(events, steps, active)
        whole = Breakdown(per_step.timeline.drop("step", "start_ns", "end_ns"),
                          per_step.categories.drop("step"))
    else:
        inside = step_rows(events, steps, axis)
        whole, per_step = device_and_step_breakdowns(events, steps, active, axis, inside)
    idle_whole, idle_step = _idle(trace, device, steps, step, events, axis)
    dev_info = {(r["host"], r["rank"], r["device"]): r for r in devices.iter_rows(named=True)}
    model = model_kernels(events)  # read by both MFUs
    by_step = mfu(events, specs_df, steps, model, inside=inside is not None) \
        if steps.height else None
    spans = axis[1].select(*DEVICE_KEYS, window_ns=pl.col("_hi") - pl.col("_lo")) \
        if axis is not None else None  # each device's first start → last end
    # one step: its own MFU; else each device's median step's, or its span's (device_mfu)
    mfu_dev = {(r["host"], r["rank"], r["device"]): r for r in (
        by_step if step is not None and by_step is not None
        else device_mfu(events, specs_df, by_step=by_step, model=model, spans=spans)
    ).iter_rows(named=True)}
    mfu_step = {(r["host"], r["rank"], r["device"], r["step"]): r["mfu"] for r in (
        by_step.iter_rows(named=True) if by_step is not None else [])}
    coverage = {(r["host"], r["rank"], r["device"]): r for r in
                kt.flops_coverage(table).iter_rows(named=True)}
    cats: dict[tuple, list[CategoryTime]] = {}
    for r in whole.categories.filter(pl.col("count") > 0).sort(
            "exclusive_ns", descending=True).iter_rows(named=True):
        cats.setdefault((r["host"], r["rank"], r["device"]), []).append(CategoryTime(
            r["category"], r["count"], r["sum_ns"], r["exclusive_ns"]))
    step_summaries: dict[tuple, list[StepSummary]] = {}
    for r in per_step.timeline.sort("rank", "device", "start_ns").iter_rows(named=True):
        key = (r["host"], r["rank"], r["device"])
        step_summaries.setdefault(key, []).append(StepSummary(
            r["step"], r["start_ns"], r["end_ns"],
            _timeline(r, idle_step.get((*key, r["step"]))),
            mfu_step.get((*key, r["step"]))))
    out = []
    for r in whole.timeline.sort("rank", "device").iter_rows(named=True):
        key = (r["host"], r["rank"], r["device"])
        info, m, cov = dev_info.get(key, {}), mfu_dev.get(key) or {}, coverage.get(key) or {}
        dev_mfu, flops_cov = m.get("mfu"), cov.get("flops_coverage")
        without = int(m.get("model_kernels_without_cost") or 0)
        out.append(DeviceSummary(
            host=r["host"], rank=r["rank"], device=r["device"], vendor=info.get("vendor"),
            arch=info.get("arch"), product=info.get("product"),
            timeline=_timeline(r, idle_whole.get(key)), categories=tuple(cats.get(key, [])),
            steps=tuple(step_summaries.get(key, [])), spec=specs.get(key), mfu=dev_mfu,
            mfu_dtype=m.get("mfu_dtype"), model_flops=m.get("model_flops"),
            model_kernels_without_cost=without, flops_coverage=flops_cov,
            compute_kernel_ns=int(cov.get("compute_kernel_ns") or 0),
            flops_covered_ns=int(cov.get("covered_ns") or 0),
            mfu_lower_bound=dev_mfu is not None and (
                without > 0 or (flops_cov is not None and flops_cov < COVERAGE_FLOOR))))
    return tuple(out)


def _timeline(row: Mapping[str, object], idle: IdleBreakdown | None) -> Timeline:
    return Timeline(*(int(row[k]) for k in TIMELINE_COLUMNS),  # type: ignore[call-overload]
                    idle_breakdown=idle or IdleBreakdown())


def _lens(trace: Trace, whole_acts: pl.DataFrame | None, same: bool) -> "LensTimeline":
    """The HLO lens inputs; their activity rows left out when they are the partial's own
    ``acts`` (``same``): :func:`tracelens.analyze.summary.merge.lens_of` puts them back."""
    from dataclasses import replace

    from tracelens.analyze.compute.hlo_findings import lens_timeline

    lens = lens_timeline(trace, whole_acts)
    return replace(lens, acts=None) if same else lens


def _idle(trace: Trace, device: int | None, steps: pl.DataFrame, step: int | None,
          selected: pl.DataFrame, axis: Axis | None
          ) -> tuple[dict[tuple, IdleBreakdown], dict[tuple, IdleBreakdown]]:
    """Idle parts per device (whole window, or the one selected step) and per device × step.

    Gaps are attributed on the unclipped events: the activity that ends a gap at a step's
    end lies in the next step. Without a step, ``selected`` (the partial's events) are
    those events, and ``axis`` their :func:`device_axis` (None: computed here)."""
    if step is None:
        events = selected
    else:
        events = trace.events
        if device is not None:
            events = events.filter(pl.col("device") == device)
    cols = [f"{p}_ns" for p in IDLE_PARTS]

    def typed(r: Mapping[str, object]) -> IdleBreakdown:
        return IdleBreakdown(*(int(r[c]) for c in cols))  # type: ignore[call-overload]
    spans = axis[1] if axis is not None else None  # each device's first/last time
    found = idle_breakdowns(events, trace.host_events, ([(steps, None)] if steps.height else [])
                            + ([(None, spans)] if step is None else []), axis)
    per_step = {(r["host"], r["rank"], r["device"], r["step"]): typed(r)
                for r in found[0].iter_rows(named=True)} if steps.height else {}
    if step is not None:
        whole = {k[:3]: v for k, v in per_step.items()}
    else:
        whole = {(r["host"], r["rank"], r["device"]): typed(r)
                 for r in found[-1].iter_rows(named=True)}
    return whole, per_step


def _kernel_groups(events: pl.DataFrame) -> pl.DataFrame:
    """Activity count and time per (name, category, subcategory, rule) and device: the top
    kernels' mergeable input (:func:`~tracelens.analyze.compute.kernel_table.kernel_groups`)."""
    return kt.kernel_groups(kt.kernel_table(events))


# -- summarize on the Analysis protocol (tracelens.engine.protocol)
# ------------------------------------

CRITICAL_TOP = 3  # projections summarize shows (``tracelens critical-path`` shows them all)
FINDINGS_TOP = 50  # what-ifs the findings see: every change the solver projects

@dataclass(frozen=True)
class CriticalPieces:
    """The hosts' critical-path parts as they came (packed when they travelled), merged
    only in ``finish`` once the summary's own reduce has let go of its rows: their nodes
    unpacked are the job's largest frame after the collective rows (128 hosts: ~200 MB
    that the collectives reduce would otherwise hold beside its own)."""

    parts: tuple[CriticalPart, ...]
    plan: JobPlan

    def merged(self) -> CriticalPart:
        """The job's critical-path part: the hosts' parts merged on the job's plan."""
        return CriticalPath().merge(self.parts, self.plan)


@dataclass(frozen=True)
class KeptSummaries:
    """The hosts' summary partials where they stayed (handles, on their Dask workers), and
    the job's plan: merged and reduced on a worker in ``finish``."""

    parts: tuple[object, ...]
    plan: JobPlan


if TYPE_CHECKING:  # the consistency gate's facts of the window travel with the parts
    from tracelens.analyze.consistency import WindowFacts

Part = tuple[SummaryPartial | KeptSummaries, CriticalPart | CriticalPieces | None,
             "WindowFacts | None"]


def _facts(part: tuple) -> "WindowFacts | None":
    """A summarize part's window facts (a part made before they were taken has none)."""
    return part[2] if len(part) > 2 else None


def _critical(options: SummaryOptions) -> CriticalPathOptions | None:
    """The critical path summarize adds: of ``--step`` (default: the middle step), not under
    per-row filters (a path through some categories' kernels only would be no path)."""
    if options.filters is not None and options.filters.active():
        return None
    return CriticalPathOptions(step=options.step, top=FINDINGS_TOP, activities="longest")


def _critical_part(trace: Trace, options: CriticalPathOptions) -> CriticalPart | None:
    """The host's critical-path part; None when ``--step`` is not one of its steps (the
    job's check says so when no host has it; a job whose hosts differ in their steps gets no
    critical-path lines)."""
    if options.step is not None and options.step not in set(trace.steps["step"].to_list()):
        return None
    return CriticalPath().partial(trace, options)


class SummaryAnalysis:
    """partial: :func:`~tracelens.analyze.summary.build.summary_partial` and the critical path's;
    merge: :func:`~tracelens.analyze.summary.merge.merge_partials` on the job's alignment,
    the critical path's parts kept as they came (:class:`CriticalPieces`);
    finish: :func:`~tracelens.analyze.summary.reduce.reduce_summary`, then the critical
    path's parts merged and :class:`~tracelens.analyze.critical.path.CriticalPath`'s top
    projections."""

    def partial(self, trace: Trace, options: SummaryOptions) -> Part:
        from tracelens.analyze.consistency import window_facts
        from tracelens.analyze.critical.graph import WindowChoice

        crit = _critical(options)
        part = None if crit is None else _critical_part(trace, crit)
        facts = None if part is None else window_facts(trace, WindowChoice(crit.step))  # type: ignore[union-attr]
        return summary_partial(trace, options), part, facts

    def pack(self, part: Part) -> Part:
        """The partial to travel and wait small (:mod:`tracelens.analyze.summary.packed`)."""
        crit = part[1] if part[1] is None else CriticalPath().pack(part[1])
        return pack_summary(part[0]), crit, _facts(part)

    def keep(self, part: Part) -> Part:
        """The partial left on this Dask worker, handles travelling instead (the engine's
        cluster outlives the finish): the summary's reduced on a worker
        (:mod:`~tracelens.analyze.summary.on_workers`), the critical path's solved in rounds
        (:mod:`~tracelens.analyze.critical.rounds`); off a worker, :meth:`pack`."""
        from tracelens.analyze.critical.rounds import keep_here
        from tracelens.analyze.summary.on_workers import keep_summary

        return (keep_summary(part[0]), None if part[1] is None else keep_here(part[1]),
                _facts(part))

    def drop(self, parts: Sequence[Part]) -> None:
        """Let go of what :meth:`keep` left on the workers (a job that fails before its
        finish; the finish takes what it uses)."""
        from tracelens.engine.worker_store import drop

        drop([p for part in parts for p in part[:2]])

    def merge(self, parts: Sequence[Part], plan: JobPlan) -> Part:
        from tracelens.engine.worker_store import Resident

        crits = [p[1] for p in parts]
        crit = None if any(c is None for c in crits) else \
            CriticalPieces(tuple(crits), plan)  # type: ignore[arg-type]
        found = [_facts(p) for p in parts]
        from tracelens.analyze.consistency import merge_facts

        facts = None if crit is None or any(f is None for f in found) else \
            merge_facts(found, plan)  # type: ignore[arg-type]
        sums = [p[0] for p in parts]
        if any(isinstance(s, Resident) for s in sums):  # reduced where they are, in finish
            return KeptSummaries(tuple(sums), plan), crit, facts  # type: ignore[arg-type]
        return self._merge_summary(sums, plan), crit, facts

    @staticmethod
    def _merge_summary(parts: Sequence[SummaryPartial], plan: JobPlan) -> SummaryPartial:
        from tracelens.analyze.summary.merge import merge_partials

        if len(parts) == 1 and parts[0].host_facts is None:  # a trace the loader combined
            return unpack_summary(parts[0]) if is_packed(parts[0]) else parts[0]
        shifts = plan.shift_of
        merged = merge_partials(list(parts), shifts, plan.alignment if shifts is not None
                                else None)
        mixed = steps_disagree(list(plan.steps_sources))
        if mixed:
            merged = replace(merged, steps_source=plan.steps_source,
                             notices=(*merged.notices, mixed))
        return merged

    def finish(self, part: Part, options: SummaryOptions) -> Summary:
        from tracelens.analyze.summary.findings import findings
        from tracelens.analyze.summary.reduce import reduce_summary

        merged, crit_part, facts = part[0], part[1], _facts(part)
        del part  # the merged summary part (every host's collective rows) is let go once
        if isinstance(merged, KeptSummaries):  # the hosts' partials stayed on the workers
            from tracelens.analyze.summary.on_workers import resident_summary

            summary = resident_summary(merged.parts, merged.plan, options,
                                       self._merge_summary)
        else:  # reduced before the critical path's solve, so that the reduce of many hosts
            summary = reduce_summary([merged], options)  # holds one of them at a time
        del merged
        crit = _critical(options)
        if crit is None:
            return replace(summary, findings=findings(
                summary, no_path="no critical path: per-row filters are in force"))
        if crit_part is None:
            return replace(summary, findings=findings(
                summary, no_path="no critical path: the hosts do not share the step"))
        from tracelens.analyze.critical.rounds import resident_result
        from tracelens.engine.worker_store import Resident

        if isinstance(crit_part, CriticalPieces) and crit_part.parts \
                and all(isinstance(p, Resident) for p in crit_part.parts):
            # the parts stayed on their workers: solved there in rounds (critical_rounds)
            res = resident_result(crit_part.parts, crit_part.plan, crit)  # type: ignore
        else:
            if isinstance(crit_part, CriticalPieces):
                crit_part = crit_part.merged()  # the pieces go as the merged part comes
            res = CriticalPath().finish(crit_part, crit)
        summary = with_critical(summary, res)
        if not res.paths:
            return summary
        # every explanation checked against the step's measured facts, when they are known
        from tracelens.analyze.consistency import gate_findings

        return gate_findings(summary, res, facts)


def with_critical(summary: Summary, res: CriticalPathResult) -> Summary:
    """``summary`` with the critical path's lines and the findings of ``res`` (no path: the
    findings say why)."""
    from tracelens.analyze.summary.findings import findings

    if not res.paths:
        why = res.notes[0] if res.notes else "no window with device activity"
        return replace(summary, critical_path=None,
                       findings=findings(summary, no_path=f"no critical path: {why}"))
    from tracelens.analyze.critical.walk import step_path_key

    longest = max(res.paths, key=lambda p: step_path_key(p.length_ns, p.idle_after_ns,
                                                         p.rank, p.device))
    summary = replace(summary, critical_path=CriticalPathLines(
        longest.step, longest.length_ns, longest.host, longest.device,
        longest.composition, res.what_if[:CRITICAL_TOP],
        tuple(a for a in longest.activities if a.device is not None and a.on_path_ns)))
    return replace(summary, findings=findings(summary, res.what_if))
