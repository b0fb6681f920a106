"""Why a job got slower: profiles of runs, their differences, and a verdict (DESIGN §6.4).

A run's *profile* is its median step (the step whose span, averaged over devices, is the
median), averaged over devices, split into components that add up to the step time exactly:
``compute:<category>`` (exclusive time of each compute category), ``straggler_wait:<type>``
(time a device sits in a collective waiting for its last participant to arrive, where no
compute hides it), ``exposed_comm:<type>`` (the rest of the communication no compute hides),
``exposed_memory`` and ``idle``. A trace without step markers is one window per device (its
whole span). Every list and mapping in the outputs has a total order (ties broken by name), so
the same inputs give byte-identical JSON whatever the hash seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import polars as pl

from tracelens.analyze.collectives import CollectiveAnalysis, analyze_collectives
from tracelens.analyze.intervals import exclusive_times
from tracelens.analyze.kernel_table import kernel_table
from tracelens.analyze.summary_reduce import hardware_counts
from tracelens.analyze.timeline import DEVICE_KEYS, clip_to_windows
from tracelens.frames import distinct
from tracelens.model import COMPUTE_CATEGORIES, Notice, Trace
from tracelens.notices import fold_per_host
from tracelens.results.encode import JSONValue, encode
from tracelens.results.filters import ActiveFilters
from tracelens.results.runs import Cause, Scaling, ScalingRun, Transition, TypeStraggler
from tracelens.results.summary import HardwareCount, hardware_text

COLLECTIVE_ORDER = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                    "collective-permute", "collective-broadcast", "send-recv", "send", "recv",
                    "reduce", "unknown")
VERDICT_MIN_SHARE = 0.10  # a cause below 10% of the lost time is listed, not named
STRAGGLER_MIN_LAST = 0.5  # named when it arrives last in at least half of its collectives


@dataclass
class RunProfile:
    path: str
    devices: int
    hosts: int
    steps: int
    step_ns: float
    components: dict[str, float]  # in component order: compute, straggler_wait, comm, ...
    kernels: pl.DataFrame  # category, program, op, key, name, ns_per_step, count_per_step
    busbw: dict[str, float | None]
    skew_ns: dict[str, float | None]
    stragglers: tuple[TypeStraggler, ...] = ()
    per_device: dict[str, dict[str, float]] = field(default_factory=dict)  # median step
    # collective type -> the costliest `tracelens hlo` finding about it (programs with HLO)
    hlo_findings: dict[str, str] = field(default_factory=dict)
    # its device table's hardware (as summarize's headline counts it) and the readers' and
    # loader's warnings, folded per host (what ``compare`` says it compared)
    hardware: tuple[HardwareCount, ...] = ()
    warnings: tuple[str, ...] = ()


def _windows(trace: Trace) -> pl.DataFrame:
    """Step windows per rank, or one whole-span window per rank when steps are not marked."""
    if trace.steps.height:
        return trace.steps.select("rank", "step", "start_ns", "end_ns")
    return trace.events.group_by("rank").agg(start_ns=pl.col("start_ns").min(),
                                            end_ns=pl.col("end_ns").max()) \
        .with_columns(step=pl.lit(0, dtype=pl.Int32)).select("rank", "step", "start_ns",
                                                             "end_ns").sort("rank")


def _waits(acts: pl.DataFrame) -> pl.DataFrame:
    """Per collective activity, the part of it spent waiting for the instance's last arrival:
    ``[start, min(end, last start))``. Instances with more participants than their group size
    lump several groups together (their wait is not one group's), so they count no wait."""
    lumped = pl.col("group_size").is_not_null() & (pl.col("participants")
                                                   > pl.col("group_size"))
    return acts.filter((pl.col("wait_ns") > 0) & ~lumped).select(
        *DEVICE_KEYS, "start_ns",
        end_ns=pl.min_horizontal("end_ns", pl.col("start_ns") + pl.col("wait_ns")),
        level=pl.lit("straggler_wait:") + _comm(acts))


def _comm(acts: pl.DataFrame) -> pl.Expr:
    """What communication components are split by: ``comm`` (``<axis>:<type>``, from
    :func:`tracelens.analyze.axes.with_comm`) when the activities have it, else the type."""
    return pl.col("comm") if "comm" in acts.columns else pl.col("type")


def comm_type(key: str) -> str:
    """The collective type of a component key (``fsdp:all-gather`` -> ``all-gather``)."""
    return key.rpartition(":")[2]


def collective_types(acts: pl.DataFrame) -> list[str]:
    """The collective types (with their axis where known: ``with_comm``) present, in
    component order (types in COLLECTIVE_ORDER, then by name; axes by name)."""
    present = set(acts.select(_comm(acts)).to_series().drop_nulls().to_list())
    order = {t: i for i, t in enumerate(COLLECTIVE_ORDER)}
    return sorted(present, key=lambda k: (order.get(comm_type(k), len(order)), comm_type(k), k))


def component_frame(trace: Trace, acts: pl.DataFrame,
                    types: list[str] | None = None) -> pl.DataFrame:
    """Per (device, step): span and every component's ns (they add up to the span).

    ``acts``: the collective activities with their instance waits
    (``analyze_collectives(...).activities``). Levels, highest priority first: compute per
    category, straggler wait per type, the rest of each collective type, memory. ``types``:
    the collective types that get columns (default: those in ``acts``; a host's part of a
    job passes the job's).
    """
    ev = trace.events
    windows = _windows(trace)
    types = collective_types(acts) if types is None else types
    leveled = pl.concat([
        ev.filter(pl.col("category").cast(pl.String).is_in(list(COMPUTE_CATEGORIES)))
        .select(*DEVICE_KEYS, "start_ns", "end_ns",
                level=pl.lit("compute:") + pl.col("category").cast(pl.String)),
        _waits(acts),
        acts.select(*DEVICE_KEYS, "start_ns", "end_ns",
                    level=pl.lit("exposed_comm:") + _comm(acts)),
        ev.filter(pl.col("category") == "memory").select(*DEVICE_KEYS, "start_ns", "end_ns",
                                                         level=pl.lit("exposed_memory")),
    ])
    levels = [f"compute:{c}" for c in COMPUTE_CATEGORIES] + [
        f"straggler_wait:{t}" for t in types] + [f"exposed_comm:{t}" for t in types] + [
        "exposed_memory"]
    clipped = clip_to_windows(leveled, windows)
    keys = [*DEVICE_KEYS, "step"]
    active = distinct(ev, DEVICE_KEYS)
    spans = active.join(windows, on="rank").with_columns(span_ns=pl.col("end_ns")
                                                          - pl.col("start_ns")).select(
        *keys, "span_ns")
    if clipped.height:
        excl = exclusive_times(clipped, keys, "level", levels).pivot(
            "level", index=keys, values="exclusive_ns")
    else:
        excl = spans.select(keys)
    wide = spans.join(excl, on=keys, how="left", nulls_equal=True)
    for level in levels:
        wide = wide.with_columns(pl.col(level).fill_null(0) if level in wide.columns
                                 else pl.lit(0, dtype=pl.Int64).alias(level))
    return wide.with_columns(idle=pl.col("span_ns") - pl.sum_horizontal(levels)).select(
        *keys, "span_ns", *levels, "idle").sort(keys)


NORMALIZE_KD = r"(?:\.kd| \[clone \.kd\])$"
NORMALIZE_CLONE = r"(?:[._]clone(?:[._]\d+)?)+$"


def normalize_kernel_expr(col: str = "name") -> pl.Expr:
    """The kernel name with only the suffixes that never tell two kernels apart stripped:
    the code-object ``.kd`` (or rocprofv3's `` [clone .kd]``) and XLA's ``.clone``/``.clone.N``.
    Numeric suffixes stay: ``input_transpose_fusion`` and ``input_transpose_fusion_1`` are
    different fusions of one program."""
    return pl.col(col).str.replace(NORMALIZE_KD, "").str.replace(NORMALIZE_CLONE, "")


def normalize_kernel(name: str) -> str:
    """``normalize_kernel_expr`` for one name."""
    return pl.select(pl.lit(name, dtype=pl.String).alias("name")).select(
        normalize_kernel_expr())["name"].item()


def program_key(ev: pl.DataFrame) -> pl.DataFrame:
    """A program's name that can be compared across runs: its module name, plus ``#k`` (the
    rank of its ``program_id`` among the trace's modules of that name) when the name repeats.
    ``program_id`` itself is a per-compilation number and differs between runs."""
    progs = ev.select("module", "program_id").unique().filter(pl.col("module").is_not_null())
    dense = pl.col("program_id").rank("dense").over("module")
    many = pl.col("program_id").n_unique().over("module") > 1
    return progs.with_columns(program=pl.when(many & dense.is_not_null()).then(
        pl.col("module") + "#" + dense.cast(pl.String)).otherwise(pl.col("module")))


def kernel_partial(trace: Trace) -> pl.DataFrame:
    """Per (category, module, program_id, op, normalized name): total ns and count over the
    trace's step windows (the whole span without steps), and the first name in sort order.
    Exact integer sums: the parts of several hosts add up (:func:`kernels_of_partials`).
    Summed from the events' :func:`~tracelens.analyze.kernel_table.kernel_table` (the one
    kernel aggregation ``summarize`` uses too): names are normalized per distinct name."""
    ev = clip_to_windows(trace.events, _windows(trace)) if trace.steps.height else trace.events
    return kernel_table(ev).with_columns(category=pl.col("category").cast(pl.String),
                                         key=normalize_kernel_expr()).group_by(
        "category", "module", "program_id", "op", "key").agg(
        name=pl.col("name").min(), ns=pl.col("sum_ns").sum(),
        count=pl.col("count").sum().cast(pl.Int64))


def kernels_of_partials(part: pl.DataFrame, n_windows: int) -> pl.DataFrame:
    """Per (category, program, op, normalized name): time and count per device-step, and the
    first of its names in sort order, from :func:`kernel_partial` rows (of one trace or of
    several hosts concatenated). Rows sorted by those keys."""
    keys = ["category", "program", "op", "key"]
    return part.join(program_key(part), on=["module", "program_id"], how="left",
                     nulls_equal=True).group_by(keys).agg(
        name=pl.col("name").min(), ns_per_step=pl.col("ns").sum() / n_windows,
        count_per_step=pl.col("count").sum() / n_windows,
    ).sort(keys, nulls_last=True)


def kernel_frame(trace: Trace, n_windows: int) -> pl.DataFrame:
    """:func:`kernels_of_partials` of the trace's own :func:`kernel_partial`."""
    return kernels_of_partials(kernel_partial(trace), n_windows)


def profile(trace: Trace, path: str = "") -> RunProfile:
    from tracelens.analyze.axes import hosts_of, with_comm

    analysis = analyze_collectives(trace.events)
    analysis.activities = with_comm(analysis.activities, trace.devices, hosts_of(trace.meta))
    return profile_of(
        path, component_frame(trace, analysis.activities), kernel_partial(trace), analysis,
        devices=distinct(trace.events, DEVICE_KEYS).height,
        steps=max(1, trace.steps.select("step").unique().height),
        hosts=trace.events["host"].n_unique(), hlo_findings=hlo_finding_texts(trace),
        hardware=hardware_counts(trace.devices),
        warnings=run_warnings(trace.meta.notices))


def run_warnings(notices: Sequence[Notice]) -> tuple[str, ...]:
    """The run's warnings, those repeated per host or file said once (as ``summarize``
    folds them)."""
    return tuple(fold_per_host(notices))


def profile_of(path: str, comp: pl.DataFrame, kernels: pl.DataFrame,
               analysis: CollectiveAnalysis, devices: int, steps: int, hosts: int,
               hlo_findings: dict[str, str], hardware: tuple[HardwareCount, ...] = (),
               warnings: tuple[str, ...] = ()) -> RunProfile:
    """The profile from its parts: :func:`component_frame` rows of every device, the
    :func:`kernel_partial` rows of every host, the job's collective analysis and counts,
    its hardware and warnings."""
    cols = [c for c in comp.columns if c not in (*DEVICE_KEYS, "step")]
    # integer sums divided once: exact, whatever the order of the rows
    per_step = comp.group_by("step").agg([pl.col(c).sum() / pl.len() for c in cols]) \
        .sort("span_ns", "step")
    median = per_step.row((per_step.height - 1) // 2, named=True) if per_step.height else {}
    acts = analysis.activities
    components = {c: float(median.get(c) or 0.0) for c in cols if c != "span_ns"}
    per_device = {f"{r['host']}/GPU{r['device']}": {c: float(r[c]) for c in components}
                  for r in comp.filter(pl.col("step") == median.get("step")).iter_rows(
                      named=True)} if median else {}
    # per type, or per <axis>:<type> where the activities carry it (``axes.with_comm``)
    busbw = {r["k"]: r["b"] for r in acts.group_by(k=_comm(acts)).agg(
        b=pl.col("busbw_gb_per_s").median()).sort("k").iter_rows(named=True)}
    skew = {r["type"]: r["s"] for r in analysis.instances.group_by("type").agg(
        s=pl.col("arrival_skew_ns").median()).sort("type").iter_rows(named=True)}
    return RunProfile(
        path=path, devices=devices, hosts=hosts, steps=steps,
        step_ns=float(median.get("span_ns") or 0.0), components=components,
        kernels=kernels_of_partials(kernels, max(1, devices * steps)), busbw=busbw,
        skew_ns=skew, stragglers=_stragglers(acts, devices * steps), per_device=per_device,
        hlo_findings=hlo_findings, hardware=hardware, warnings=warnings)


def hlo_finding_texts(trace: Trace, acts: pl.DataFrame | None = None) -> dict[str, str]:
    """Collective type -> the message of the costliest HLO finding about it (findings come
    sorted by measured exposed time per step); empty without HLO in the trace. ``acts``: the
    trace's collective activities, when the caller has them."""
    if not trace.modules.height:
        return {}
    from tracelens.analyze.hlo_findings import lens_trace

    out: dict[str, str] = {}
    for f in lens_trace(trace, acts=acts).findings:
        if f.opcode:
            out.setdefault(f.opcode, f.message)
    return out


def _stragglers(acts: pl.DataFrame, device_steps: int) -> tuple[TypeStraggler, ...]:
    """Per device and collective type: how often it arrived last, and the waiting it caused
    (the others' waits in those instances), in total and per device-step (over all devices
    and steps of the run, so comparable with the components)."""
    if acts.is_empty():
        return ()
    inst = ["instance_key", "occurrence"]
    last = acts.filter(pl.col("is_last")).select(*inst, *DEVICE_KEYS, "type")
    waits = acts.group_by(inst).agg(total_wait=pl.col("wait_ns").sum())
    caused = last.join(waits, on=inst).group_by(*DEVICE_KEYS, "type").agg(
        times_last=pl.len(), wait_ns=pl.col("total_wait").sum())
    counts = acts.group_by(*DEVICE_KEYS, "type").agg(instances=pl.len())
    rows = counts.join(caused, on=[*DEVICE_KEYS, "type"], how="left").with_columns(
        pl.col("times_last").fill_null(0), pl.col("wait_ns").fill_null(0),
    ).with_columns(wait_per_step_ns=pl.col("wait_ns") / device_steps) \
        .sort(["wait_ns", "times_last", *DEVICE_KEYS, "type"],
              descending=[True, True, False, False, False, False], nulls_last=True)
    return tuple(TypeStraggler(**r) for r in rows.iter_rows(named=True))


def _component_label(c: str) -> str:
    kind, _, what = c.partition(":")
    return {"compute": f"{what} compute", "exposed_comm": f"exposed {what.replace(':', ' ')}",
            "straggler_wait": f"waiting in {what.replace(':', ' ')} for the last arrival",
            "exposed_memory": "exposed memory traffic", "idle": "idle time"}[kind]


def hardware_difference(a: RunProfile, b: RunProfile, unknown_too: bool = True) -> list[str]:
    """What differs between two runs' hardware: vendor (a TPU run and a GPU run, say), else
    product (or arch); a side whose devices are unknown cannot be checked (said when
    ``unknown_too``)."""
    out = []
    sides = f"base: {hardware_text(a.hardware)}, new: {hardware_text(b.hardware)}"
    unknown = [s for s, p in (("base", a), ("new", b))
               if not p.hardware or any(h.kind is None for h in p.hardware)]
    vendors = [{h.vendor for h in p.hardware if h.vendor} for p in (a, b)]
    kinds = [{h.kind for h in p.hardware if h.kind} for p in (a, b)]
    if unknown and unknown_too:
        out.append(f"the hardware of {' and '.join(unknown)} is not known ({sides}): whether "
                   "both runs are on the same hardware cannot be checked")
    if all(vendors) and vendors[0] != vendors[1]:
        out.append(f"the runs are on different vendors' hardware ({sides}): kernel names and "
                   "libraries differ, so few kernels match by name, and the step-time change "
                   "includes the hardware's")
    elif all(kinds) and kinds[0] != kinds[1]:
        out.append(f"the runs are on different hardware ({sides}): the step-time change "
                   "includes the hardware's")
    return out


def _warnings(a: RunProfile, b: RunProfile, eff: float | None, strong: bool) -> list[str]:
    """What a reader must know before trusting the efficiency and the causes: the hardware
    first (scaling across hardware mixes the hardware's change into the efficiency)."""
    out = hardware_difference(a, b, unknown_too=False)
    if b.devices < a.devices:
        out.append(f"runs go from {a.devices} down to {b.devices} devices: the larger run is the "
                   "baseline here, so 'lost' time is what the smaller run loses against it; "
                   "give runs in increasing device count to diagnose scaling")
    elif eff is not None and eff > 1.0:
        if strong:
            out.append(f"efficiency {100 * eff:.0f}% is above 100%: the step shrank more than "
                       f"the device ratio {a.devices} → {b.devices}, so the runs probably do "
                       "not do the same global work (strong scaling assumes they do), or the "
                       "smaller run was held back by something the larger one escapes")
        else:
            out.append(f"efficiency {100 * eff:.0f}% is above 100%: the {b.devices}-device step "
                       f"is shorter than the {a.devices}-device one, so the runs probably do "
                       "not do the same work per device (weak scaling assumes they do); with a "
                       "fixed global batch use --strong")
    return out


def scaling_transition(a: RunProfile, b: RunProfile, strong: bool = False) -> Transition:
    """From run a to run b: efficiency, the lost time split into components, and a verdict.

    Weak scaling expects the same step time; strong scaling expects it to shrink by the device
    ratio, so there every component of a is scaled by devices(a)/devices(b) before comparing.
    The verdict is read off the causes (the same deltas and shares), never recomputed.
    """
    scale = a.devices / b.devices if strong else 1.0
    ideal = a.step_ns * scale
    eff = (ideal / b.step_ns) if b.step_ns else None
    lost = b.step_ns - ideal
    deltas = sorted(((b.components.get(k, 0.0) - a.components.get(k, 0.0) * scale, k)
                     for k in set(a.components) | set(b.components)),
                    key=lambda dk: (-dk[0], dk[1]))

    def finding(k: str) -> str | None:
        kind, _, what = k.partition(":")
        return b.hlo_findings.get(comm_type(what)) if kind == "exposed_comm" else None
    causes = tuple(Cause(component=k, delta_ns=d, share=d / lost if lost else None,
                         hlo_finding=finding(k)) for d, k in deltas)
    return Transition(
        from_path=a.path, to_path=b.path, devices=(a.devices, b.devices), efficiency=eff,
        mode="strong" if strong else "weak", step_ns=(a.step_ns, b.step_ns), delta_ns=lost,
        causes=causes, busbw={t: (a.busbw.get(t), b.busbw.get(t))
                              for t in sorted(set(a.busbw) | set(b.busbw))},
        arrival_skew_ns={t: (a.skew_ns.get(t), b.skew_ns.get(t))
                         for t in sorted(set(a.skew_ns) | set(b.skew_ns))},
        stragglers=tuple(s for s in b.stragglers if s.times_last)[:5],
        warnings=tuple(_warnings(a, b, eff, strong)),
        verdict=tuple(verdict(a, b, causes, lost)))


def transition(a: RunProfile, b: RunProfile, strong: bool = False) -> JSONValue:
    """The JSON of :func:`scaling_transition` (README "scaling")."""
    return encode(scaling_transition(a, b, strong))


def scaling(profiles: list[RunProfile], steps_sources: list[str], strong: bool = False,
            filters: ActiveFilters | None = None) -> Scaling:
    """The ``tracelens scaling`` result: each run and each transition to the next run."""
    return Scaling(
        runs=tuple(ScalingRun(path=p.path, devices=p.devices, hosts=p.hosts, steps=p.steps,
                              steps_source=src, step_ns=p.step_ns, components=p.components)
                   for p, src in zip(profiles, steps_sources)),
        transitions=tuple(scaling_transition(a, b, strong)
                          for a, b in zip(profiles, profiles[1:])),
        filters=filters or None)


def _concentration(a: RunProfile, b: RunProfile, comp: str) -> str:
    """", mostly on host/GPUn (+x ms per step there)" when one device holds most of a
    component's growth (summed over the new run's devices, each against the old run's
    average); ties go to the first device name."""
    base = a.components.get(comp, 0.0)
    growth = {dev: vals.get(comp, 0.0) - base for dev, vals in sorted(b.per_device.items())}
    total = sum(growth.values())
    if total <= 0 or len(growth) < 2:
        return ""
    dev, top = min(growth.items(), key=lambda kv: (-kv[1], kv[0]))
    if top / total < 0.5:
        return ""
    return f", mostly on {dev} (+{top / 1e6:.3f} ms per step there)"


def _straggler_text(b: RunProfile, kind: str, delta: float) -> str:
    """The words for a ``straggler_wait:<kind>`` cause: who the others wait for, when one
    device arrives last in most instances of that type."""
    per_device = f"+{delta / 1e6:.3f} ms per step per device" if delta >= 0 else \
        f"{delta / 1e6:.3f} ms per step per device"
    for s in b.stragglers:  # sorted: most waiting caused first
        if s.type == comm_type(kind) and s.instances and \
                s.times_last / s.instances >= STRAGGLER_MIN_LAST:
            return (f"waiting for {s.host}/GPU{s.device}, which arrives last in "
                    f"{100 * s.times_last / s.instances:.0f}% of {kind}s "
                    f"(exposed waiting {per_device})")
    return (f"waiting in {kind}s for the last arrival, with no device last in most of them "
            f"(exposed waiting {per_device})")


def _gb_per_s(value: float) -> str:
    """Whole GB/s where that says something; three significant digits below 10 GB/s (small
    collectives), so a change never reads "fell from 0 to 0"."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def verdict(a: RunProfile, b: RunProfile, causes: Sequence[Cause],
            lost: float) -> list[str]:
    """A few ranked sentences naming the causes that explain most of the lost time: the
    causes' own deltas and shares, in their order."""
    if lost == 0:
        return [f"step time did not change ({b.step_ns / 1e6:.3f} ms per step)"]
    if lost < 0:
        return [f"step time did not grow ({a.step_ns / 1e6:.3f} → {b.step_ns / 1e6:.3f} ms "
                "per step)"]
    lines, listed = [], 0.0
    for c in causes:
        comp, delta, share = c.component, c.delta_ns, c.share
        if share is None or share < VERDICT_MIN_SHARE or len(lines) == 4:
            continue
        listed += share
        kind, _, what = comp.partition(":")
        text = f"{100 * share:.0f}% of the added step time is "
        if kind == "straggler_wait":
            text += _straggler_text(b, what, delta)
        else:
            text += _component_label(comp) + _concentration(a, b, comp)
        if kind == "exposed_comm":
            ctype = comm_type(what)
            before, after = a.busbw.get(what), b.busbw.get(what)
            if before and after:
                text += (f"; busbw {'fell' if after < before else 'rose'} from "
                         f"{_gb_per_s(before)} to {_gb_per_s(after)} GB/s")
            if ctype in b.hlo_findings:  # why the compiler put it there (tracelens hlo)
                text += f"; {b.hlo_findings[ctype]}"
        lines.append(text)
    if not lines:
        return [f"step time grew {lost / 1e6:.3f} ms per step with no single "
                f"component above {100 * VERDICT_MIN_SHARE:.0f}% of it"]
    if listed > 1.0:  # say why the shares add to more than 100%
        shrank = sorted((c for c in causes if c.delta_ns < 0), key=lambda c: c.delta_ns)[:2]
        lines.append("these shares add to more than 100% because other components shrank: "
                     + ", ".join(f"{_component_label(c.component)} {c.delta_ns / 1e6:.3f} ms "
                                 "per step" for c in shrank))
    return lines
