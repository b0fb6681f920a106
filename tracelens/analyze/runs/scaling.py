"""Why a job got slower: profiles of runs, their differences, and a verdict
(docs/compare.md#definitions).

A run's *profile* is its median step (the step whose span, averaged over devices, is the
median), averaged over devices, split into components that add up to the step time exactly:
``compute:<category>`` (exclusive time of each compute category), ``straggler_wait:<type>``
(the time the step loses to a collective's last arrival: :func:`_waits`, :func:`move_lateness`),
``exposed_comm:<type>`` (the rest of the communication no compute hides), ``exposed_memory``
and ``idle``. A trace without step markers is one window per device (its whole span). Between
two runs, components move both ways: shares are of the gross change, and a change within the
runs' step-to-step noise (:func:`noise`) is not decomposed (docs/compare.md). Every list and
mapping in the outputs has a total order (ties broken by name), so the same inputs give
byte-identical JSON whatever the hash seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import polars as pl

from tracelens.analyze.communication.collectives import CollectiveAnalysis, analyze_collectives
from tracelens.core.intervals import exclusive_times
from tracelens.analyze.summary.reduce import hardware_counts
from tracelens.analyze.runs.kernels import kernel_partial, kernels_of_partials, run_windows
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, clip_to_windows
from tracelens.core.frames import distinct
from tracelens.core.model import COMPUTE_CATEGORIES, DEVICE_KINDS, Trace
from tracelens.core.notices import run_warnings
from tracelens.results.encode import JSONValue, encode
from tracelens.results.filters import ActiveFilters
from tracelens.results.runs import (Cause, Noise, Scaling, ScalingRun, Transition,
                                    TypeStraggler)
from tracelens.results.summary import HardwareCount

COLLECTIVE_ORDER = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                    "collective-permute", "collective-broadcast", "send-recv", "send", "recv",
                    "reduce", "unknown")
VERDICT_MIN_SHARE = 0.10  # a cause below 10% of the gross change is listed, not named
NOISE_Z = 2.0  # the noise floor in standard errors of the difference of two median steps
SE_MEDIAN = 1.2533  # √(π/2): a median's standard error over the mean's (normal steps)
MAD_SIGMA = 1.4826  # a normal distribution's σ over its median absolute deviation
STRAGGLER_MIN_LAST = 0.5  # named when it arrives last in at least half of its collectives


@dataclass
class RunProfile:
    path: str
    devices: int
    hosts: int
    steps: int
    step_ns: float
    components: dict[str, float]  # in component order: compute, straggler_wait, comm, ...
    kernels: pl.DataFrame  # category, program, op, key, name, jax_op, ns_per_step, count_per_step
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
    # every step's span averaged over devices, by step number (the noise floor's input)
    step_times: tuple[float, ...] = ()
    # XLA module name -> its HLO fingerprints (``run_match.fingerprints``; empty without HLO)
    fingerprints: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # and of its programs' parameter and result shapes (compared across vendors)
    signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)


def with_arrivals(acts: pl.DataFrame) -> pl.DataFrame:
    """Matched collective activities (``match_instances``' columns) with ``late_from_ns``: on
    an instance's unique last arrival, the latest start among the other participants (when
    the others were all there), else null. Instance-wide: computed before a job's
    activities are split per host."""
    inst = ["instance_key", "occurrence"]
    others = pl.when(~pl.col("is_last")).then(pl.col("start_ns")).max().over(inst)
    return acts.with_columns(late_from_ns=pl.when(pl.col("is_last")).then(others))


def _lumped() -> pl.Expr:
    """Instances with more participants than their group size lump several groups together
    (their wait is not one group's): they count no wait and no lateness."""
    return pl.col("group_size").is_not_null() & (pl.col("participants")
                                                 > pl.col("group_size"))


def _waits(acts: pl.DataFrame) -> pl.DataFrame:
    """The time each early device waits for a collective's last arrival, as intervals
    (docs/compare.md#definitions): the *last* ``wait_ns`` of the activity, ``[end - wait, end)``.

    Had the last participant come with the others, the transfer would have started at the
    device's own arrival and the collective would have ended ``wait_ns`` sooner: compute that
    overlaps the activity's start hides the transfer, not the wait. Counted where the wait
    sits, ``[start, start + wait)``, compute hid the wait, and the transfer it pushed past the
    compute read as exposed communication (the planted 8 -> 64 GPU case: 0.689 ms of
    waiting and 3.788 ms of exposed all-reduce for a planted 1.5 ms and 3.0 ms)."""
    return acts.filter((pl.col("wait_ns") > 0) & ~_lumped()).select(
        *DEVICE_KEYS,
        start_ns=pl.max_horizontal("start_ns", pl.col("end_ns") - pl.col("wait_ns")),
        end_ns="end_ns", level=pl.lit("straggler_wait:") + _comm(acts))


def _lateness(acts: pl.DataFrame) -> pl.DataFrame:
    """The last arrival's lateness, ``[late_from, start)``: from the others' latest arrival to
    its own (level ``straggler_late:<type>``). It is the others' wait seen from the device that
    caused it; :func:`move_lateness` books it as that device's straggler wait."""
    return acts.filter(pl.col("late_from_ns").is_not_null()
                       & (pl.col("late_from_ns") < pl.col("start_ns")) & ~_lumped()).select(
        *DEVICE_KEYS, start_ns="late_from_ns", end_ns="start_ns",
        level=pl.lit("straggler_late:") + _comm(acts))


def move_lateness(comp: pl.DataFrame) -> pl.DataFrame:
    """:func:`component_frame` rows of a whole job (every device of a step) with each device's
    lateness (``straggler_late:<type>``, ns of its step in which the others waited for it)
    moved into its ``straggler_wait:<type>``, and the ``straggler_late`` columns dropped.

    The time comes out of what the late device spent *more* than the devices that were on
    time: per component, its excess over the step's median of the devices with no lateness
    (of every device where none was on time), taken in proportion to those excesses and at
    most their sum. So a device late by d because its GEMM ran d longer shows the others'
    GEMM time and d of waiting, as they do: a run where one device of n is late by d shows d
    of waiting on every device, not d·(n-1)/n of waiting and d/n of compute. Components
    still add up to the span."""
    late = [c for c in comp.columns if c.startswith("straggler_late:")]
    if not late:
        return comp
    keys = [*DEVICE_KEYS, "step"]
    waits = [c.replace("straggler_late:", "straggler_wait:", 1) for c in late]
    parts = [c for c in comp.columns if c not in (*keys, "span_ns", *late, *waits)]
    total = pl.sum_horizontal(late)
    if not comp.height or not comp.select(total.sum()).item():
        return comp.drop(late)
    on_time = comp.filter(total == 0).group_by("step").agg(pl.col(parts).median())
    ref = comp.group_by("step").agg(pl.col(parts).median()).join(
        on_time, on="step", how="left", suffix="__on").select(
        "step", *[pl.coalesce(c + "__on", c).alias(c + "__ref") for c in parts])
    excess = {c: pl.max_horizontal(pl.col(c) - pl.col(c + "__ref"), pl.lit(0.0))
              for c in parts}
    x = comp.join(ref, on="step", how="left").with_columns(
        _late=total, _excess=pl.sum_horizontal(list(excess.values())), **{
            f"{c}__x": e for c, e in excess.items()})
    moved = pl.min_horizontal("_late", "_excess")
    frac = pl.when(pl.col("_excess") > 0).then(moved / pl.col("_excess")).otherwise(0.0)
    # whole ns taken per component, so every column stays an exact integer; the waits get
    # what was taken, split over the types by their lateness (the last type the remainder)
    x = x.with_columns(**{f"{c}__m": (pl.col(f"{c}__x") * frac).round().cast(pl.Int64)
                          for c in parts})
    x = x.with_columns(_moved=pl.sum_horizontal([f"{c}__m" for c in parts]))
    split = [(pl.col("_moved") * pl.col(lc) / pl.col("_late")).floor().cast(pl.Int64)
             for lc in late[:-1]]
    split.append(pl.col("_moved") - pl.sum_horizontal(split) if split else pl.col("_moved"))
    return x.with_columns(
        *[(pl.col(c) - pl.col(f"{c}__m")).alias(c) for c in parts],
        *[(pl.col(w) + pl.when(pl.col("_late") > 0).then(m).otherwise(0)).alias(w)
          for w, m in zip(waits, split)],
    ).select(comp.drop(late).columns)


def _comm(acts: pl.DataFrame) -> pl.Expr:
    """What communication components are split by: ``comm`` (``<axis>:<type>``, from
    :func:`tracelens.analyze.communication.axes.with_comm`) when the activities have it, else the
    type."""
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
    (``analyze_collectives(...).activities``; :func:`with_arrivals` of them where a job's
    activities are split per host before this). Levels, highest priority first: compute per
    category, straggler wait per type (:func:`_waits`), the rest of each collective type,
    memory. Besides those, ``straggler_late:<type>``: the device's lateness as the last
    arrival (:func:`_lateness`, not part of the span's sum), which :func:`move_lateness`
    books once every device's rows are together. ``types``:
    the collective types that get columns (default: those in ``acts``; a host's part of a
    job passes the job's).
    """
    ev = trace.events
    windows = run_windows(trace)
    types = collective_types(acts) if types is None else types
    if "late_from_ns" not in acts.columns:  # a whole job's activities: instance-wide here
        acts = with_arrivals(acts)
    leveled = pl.concat([
        ev.filter(pl.col("category").cast(pl.String).is_in(list(COMPUTE_CATEGORIES)))
        .select(*DEVICE_KEYS, "start_ns", "end_ns",
                level=pl.lit("compute:") + pl.col("category").cast(pl.String)),
        _waits(acts), _lateness(acts),
        acts.select(*DEVICE_KEYS, "start_ns", "end_ns",
                    level=pl.lit("exposed_comm:") + _comm(acts)),
        ev.filter(pl.col("category") == "memory").select(*DEVICE_KEYS, "start_ns", "end_ns",
                                                         level=pl.lit("exposed_memory")),
    ])
    late = [f"straggler_late:{t}" for t in types]
    levels = [f"compute:{c}" for c in COMPUTE_CATEGORIES] + [
        f"straggler_wait:{t}" for t in types] + [f"exposed_comm:{t}" for t in types] + [
        "exposed_memory"]
    clipped = clip_to_windows(leveled, windows)
    keys = [*DEVICE_KEYS, "step"]
    active = distinct(ev, DEVICE_KEYS)
    spans = active.join(windows, on="rank").with_columns(span_ns=pl.col("end_ns")
                                                          - pl.col("start_ns")).select(
        *keys, "span_ns")
    wide = spans
    for lv in (levels, late):  # lateness: its own exclusive times (time in none, or several)
        if clipped.height and lv:
            excl = exclusive_times(clipped, keys, "level", lv).pivot(
                "level", index=keys, values="exclusive_ns")
            wide = wide.join(excl, on=keys, how="left", nulls_equal=True)
        for level in lv:
            wide = wide.with_columns(pl.col(level).fill_null(0) if level in wide.columns
                                     else pl.lit(0, dtype=pl.Int64).alias(level))
    wide = wide.with_columns(idle=pl.col("span_ns") - pl.sum_horizontal(levels))
    return wide.select(*keys, "span_ns", *levels, "idle", *late).sort(keys)


def profile(trace: Trace, path: str = "") -> RunProfile:
    from tracelens.analyze.communication.axes import hosts_of, with_comm

    analysis = analyze_collectives(trace.events)
    analysis.activities = with_comm(analysis.activities, trace.devices, hosts_of(trace.meta))
    return profile_of(
        path, component_frame(trace, analysis.activities), kernel_partial(trace), analysis,
        devices=distinct(trace.events, DEVICE_KEYS).height,
        steps=max(1, trace.steps.select("step").unique().height),
        hosts=trace.events["host"].n_unique(), hlo_findings=hlo_finding_texts(trace),
        hardware=hardware_counts(trace.devices),
        warnings=run_warnings(trace.meta.notices), modules=trace.modules)


def device_kind_of(hardware: Sequence[HardwareCount]) -> str:
    """The run's device kind for labels (``host/TPU3``): :data:`tracelens.core.model.DEVICE_KINDS`
    of its devices' vendor when they all have one kind, else GPU."""
    kinds = {DEVICE_KINDS.get((h.vendor or "").lower(), "GPU") for h in hardware}
    return kinds.pop() if len(kinds) == 1 else "GPU"


def profile_of(path: str, comp: pl.DataFrame, kernels: pl.DataFrame,
               analysis: CollectiveAnalysis, devices: int, steps: int, hosts: int,
               hlo_findings: dict[str, str], hardware: tuple[HardwareCount, ...] = (),
               warnings: tuple[str, ...] = (), modules: pl.DataFrame | None = None
               ) -> RunProfile:
    """The profile from its parts: :func:`component_frame` rows of every device, the
    :func:`kernel_partial` rows of every host, the job's collective analysis and counts,
    its hardware and warnings, and its ``trace.modules`` (the programs' HLO)."""
    from tracelens.analyze.runs.match import fingerprints

    comp = move_lateness(comp)
    cols = [c for c in comp.columns if c not in (*DEVICE_KEYS, "step")]
    # integer sums divided once: exact, whatever the order of the rows
    per_step = comp.group_by("step").agg([pl.col(c).sum() / pl.len() for c in cols]) \
        .sort("span_ns", "step")
    median = per_step.row((per_step.height - 1) // 2, named=True) if per_step.height else {}
    acts = analysis.activities
    components = {c: float(median.get(c) or 0.0) for c in cols if c != "span_ns"}
    kind = device_kind_of(hardware)
    per_device = {f"{r['host']}/{kind}{r['device']}": {c: float(r[c]) for c in components}
                  for r in comp.filter(pl.col("step") == median.get("step")).iter_rows(
                      named=True)} if median else {}
    # per type, or per <axis>:<type> where the activities carry it (``axes.with_comm``)
    busbw = {r["k"]: r["b"] for r in acts.group_by(k=_comm(acts)).agg(
        b=pl.col("busbw_gb_per_s").median()).sort("k").iter_rows(named=True)}
    skew = {r["type"]: r["s"] for r in analysis.instances.group_by("type").agg(
        s=pl.col("arrival_skew_ns").median()).sort("type").iter_rows(named=True)}
    step_times = tuple(float(v) for v in per_step.sort("step")["span_ns"]) \
        if per_step.height else ()
    return RunProfile(
        path=path, devices=devices, hosts=hosts, steps=steps, step_times=step_times,
        step_ns=float(median.get("span_ns") or 0.0), components=components,
        kernels=kernels_of_partials(kernels, max(1, devices * steps)), busbw=busbw,
        skew_ns=skew, stragglers=_stragglers(acts, devices * steps), per_device=per_device,
        hlo_findings=hlo_findings, hardware=hardware, warnings=warnings,
        fingerprints=fingerprints(modules) if modules is not None else {},
        signatures=fingerprints(modules, signature=True) if modules is not None else {})


def hlo_finding_texts(trace: Trace, acts: pl.DataFrame | None = None) -> dict[str, str]:
    """Collective type -> the message of the costliest HLO finding about it (findings come
    sorted by measured exposed time per step); empty without HLO in the trace. ``acts``: the
    trace's collective activities, when the caller has them."""
    if not trace.modules.height:
        return {}
    from tracelens.analyze.compute.hlo_findings import lens_trace

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


def _warnings(a: RunProfile, b: RunProfile, eff: float | None, strong: bool) -> list[str]:
    """What a reader must know before trusting the efficiency and the causes."""
    out = []
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


def median_se(times: Sequence[float]) -> float | None:
    """The standard error of a run's median step from its own steps: 1.2533 · σ / √n with
    σ = 1.4826 · MAD (the median absolute deviation from the median step), so one warm-up or
    checkpoint step does not widen it; None with fewer than two steps."""
    n = len(times)
    if n < 2:
        return None
    x = sorted(times)
    med = _median(x)
    mad = _median(sorted(abs(v - med) for v in x))
    return SE_MEDIAN * MAD_SIGMA * mad / n ** 0.5


def _median(x: Sequence[float]) -> float:
    n = len(x)
    return x[n // 2] if n % 2 else (x[n // 2 - 1] + x[n // 2]) / 2


def noise(a: RunProfile, b: RunProfile, delta: float, scale: float = 1.0) -> Noise:
    """Whether ``delta`` (b's step less a's, a's scaled by ``scale``) stands out of the runs'
    step-to-step noise (:class:`~tracelens.results.runs.Noise`)."""
    se_a, se_b = median_se(a.step_times), median_se(b.step_times)
    se = (None if se_a is None else se_a * scale, se_b)
    if se_a is None or se_b is None:
        few = " and ".join(f"{side} ({len(p.step_times)} step)" for side, p in
                           (("base", a), ("new", b)) if len(p.step_times) < 2)
        return Noise(floor_ns=None, within=None, se_ns=se,
                     reason=f"one step in {few}: its step-to-step spread is unknown")
    floor = NOISE_Z * ((se_a * scale) ** 2 + se_b ** 2) ** 0.5
    return Noise(floor_ns=floor, within=abs(delta) <= floor, se_ns=se)


def noise_warnings(quiet: Noise) -> list[str]:
    """The warning when the noise floor is unknown: the change is then decomposed with
    nothing to say whether it is noise."""
    if quiet.reason is None:
        return []
    return [f"noise floor unknown ({quiet.reason}): the change is decomposed without knowing "
            "whether it stands out of the runs' noise; profile several steps"]


def gross_shares(deltas: Sequence[float]) -> tuple[float, list[float | None]]:
    """The gross change (the sum of absolute deltas) and each delta's share of it, |d|/gross:
    at most 1 each, 1 together; None where nothing moved."""
    gross = float(sum(abs(d) for d in deltas))
    return gross, [abs(d) / gross if gross else None for d in deltas]


def scaling_transition(a: RunProfile, b: RunProfile, strong: bool = False) -> Transition:
    """From run a to run b: efficiency, the change split into components, and a verdict.

    Weak scaling expects the same step time; strong scaling expects it to shrink by the device
    ratio, so there every component of a is scaled by devices(a)/devices(b) before comparing.
    Components move both ways: each cause's share is of the gross change (the sum of their
    absolute deltas), and a change within the runs' noise (:func:`noise`) is not decomposed.
    The verdict is read off the causes (the same deltas and shares), never recomputed.
    """
    scale = a.devices / b.devices if strong else 1.0
    ideal = a.step_ns * scale
    eff = (ideal / b.step_ns) if b.step_ns else None
    lost = b.step_ns - ideal
    deltas = sorted(((b.components.get(k, 0.0) - a.components.get(k, 0.0) * scale, k)
                     for k in set(a.components) | set(b.components)),
                    key=lambda dk: (-abs(dk[0]), dk[1]))
    gross, shares = gross_shares([d for d, _ in deltas])
    quiet = noise(a, b, lost, scale)

    def finding(k: str) -> str | None:
        kind, _, what = k.partition(":")
        return b.hlo_findings.get(comm_type(what)) if kind == "exposed_comm" else None
    causes = tuple(Cause(component=k, delta_ns=d, share=sh, hlo_finding=finding(k))
                   for (d, k), sh in zip(deltas, shares))
    return Transition(
        from_path=a.path, to_path=b.path, devices=(a.devices, b.devices), efficiency=eff,
        mode="strong" if strong else "weak", step_ns=(a.step_ns, b.step_ns), delta_ns=lost,
        gross_ns=gross, noise=quiet,
        causes=causes, busbw={t: (a.busbw.get(t), b.busbw.get(t))
                              for t in sorted(set(a.busbw) | set(b.busbw))},
        arrival_skew_ns={t: (a.skew_ns.get(t), b.skew_ns.get(t))
                         for t in sorted(set(a.skew_ns) | set(b.skew_ns))},
        stragglers=tuple(s for s in b.stragglers if s.times_last)[:5],
        warnings=tuple(_warnings(a, b, eff, strong) + noise_warnings(quiet)),
        verdict=tuple(verdict(a, b, causes, lost, quiet, ideal)))


def transition(a: RunProfile, b: RunProfile, strong: bool = False) -> JSONValue:
    """The JSON of :func:`scaling_transition` (README "scaling")."""
    return encode(scaling_transition(a, b, strong))


def scaling(profiles: list[RunProfile], steps_sources: list[str], strong: bool = False,
            filters: ActiveFilters | None = None) -> Scaling:
    """The ``tracelens scaling`` result: each run and each transition to the next run, whose
    warnings also say where the two runs differ in hardware or program
    (:mod:`tracelens.analyze.runs.match`; a different device count is the point here)."""
    from dataclasses import replace

    from tracelens.analyze.runs.match import hardware_notices, program_notices

    def checked(a: RunProfile, b: RunProfile) -> Transition:
        t = scaling_transition(a, b, strong)
        found = [n.text for n in (*hardware_notices(a, b, counts=False),
                                  *program_notices(a, b))]
        return replace(t, warnings=(*found, *t.warnings)) if found else t

    return Scaling(
        runs=tuple(ScalingRun(path=p.path, devices=p.devices, hosts=p.hosts, steps=p.steps,
                              steps_source=src, step_ns=p.step_ns, components=p.components,
                              median_se_ns=median_se(p.step_times))
                   for p, src in zip(profiles, steps_sources)),
        transitions=tuple(checked(a, b) for a, b in zip(profiles, profiles[1:])),
        filters=filters or None)


def _concentration(a: RunProfile, b: RunProfile, comp: str) -> str:
    """", mostly on host/GPUn (+x ms there)" when one device holds most of a
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
    return f", mostly on {dev}: +{top / 1e6:.3f} ms there"


def _straggler_text(b: RunProfile, kind: str, delta: float) -> str:
    """The words for a ``straggler_wait:<kind>`` cause: who the others wait for, when one
    device arrives last in most instances of that type."""
    per_device = f"{_ms(delta)} per step per device"
    for s in b.stragglers:  # sorted: most waiting caused first
        if s.type == comm_type(kind) and s.instances and \
                s.times_last / s.instances >= STRAGGLER_MIN_LAST:
            return (f"waiting for {s.host}/{device_kind_of(b.hardware)}{s.device}, which "
                    "arrives last in "
                    f"{100 * s.times_last / s.instances:.0f}% of {kind}s ({per_device})")
    return (f"waiting in {kind}s for the last arrival, with no device last in most of them "
            f"({per_device})")


def _gb_per_s(value: float) -> str:
    """Whole GB/s where that says something; three significant digits below 10 GB/s (small
    collectives), so a change never reads "fell from 0 to 0"."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:+,.3f} ms"


def verdict(a: RunProfile, b: RunProfile, causes: Sequence[Cause], lost: float,
            quiet: Noise | None = None, ideal: float | None = None) -> list[str]:
    """A few ranked sentences naming the components that moved most, with their share of
    the gross change and their delta, in the causes' order; one sentence when the step did
    not change or changed within the runs' noise (``quiet``: :func:`noise`); ``ideal``: a's
    step as b is measured against it (scaled in strong scaling)."""
    ideal = a.step_ns if ideal is None else ideal
    if lost == 0:
        return [f"step time did not change ({b.step_ns / 1e6:.3f} ms per step)"]
    if quiet is not None and quiet.within:
        return [f"no significant change: step time {_ms(lost)} per step ({ideal / 1e6:.3f} → "
                f"{b.step_ns / 1e6:.3f} ms) is within the runs' step-to-step noise "
                f"(±{quiet.floor_ns / 1e6:.3f} ms: twice the standard error of the "
                "difference of their median steps); not decomposed"]
    lines = []
    for c in causes:
        comp, delta, share = c.component, c.delta_ns, c.share
        if share is None or share < VERDICT_MIN_SHARE or len(lines) == 4:
            continue
        kind, _, what = comp.partition(":")
        text = f"{100 * share:.0f}% of the gross change is "
        if kind == "straggler_wait":
            text += _straggler_text(b, what, delta)
        else:
            text += (_component_label(comp) + f" ({_ms(delta)} per step per device"
                     + _concentration(a, b, comp) + ")")
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
        return [f"step time changed {_ms(lost)} per step with no single component above "
                f"{100 * VERDICT_MIN_SHARE:.0f}% of the gross change"]
    grew = sum(c.delta_ns for c in causes if c.delta_ns > 0)
    shrank = sum(c.delta_ns for c in causes if c.delta_ns < 0)
    if grew and shrank and min(grew, -shrank) >= VERDICT_MIN_SHARE * (grew - shrank):
        lines.append(f"components moved both ways: {_ms(grew)} grew and {_ms(shrank)} shrank "
                     f"per step, net {_ms(lost)} (shares are of the gross "
                     f"{(grew - shrank) / 1e6:,.3f} ms)")
    return lines
