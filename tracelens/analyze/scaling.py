"""Why a job got slower: profiles of runs, their differences, and a verdict (DESIGN §6.4).

A run's *profile* is its median step (the step whose span, averaged over devices, is the
median), averaged over devices, split into components that add up to the step time exactly:
``compute:<category>`` (exclusive time of each compute category), ``exposed_comm:<type>``
(communication no compute hides, per collective type), ``exposed_memory`` and ``idle``.
A trace without step markers is one window per device (its whole span).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracelens.analyze.collectives import analyze_collectives, collective_activities
from tracelens.analyze.intervals import exclusive_times
from tracelens.analyze.timeline import DEVICE_KEYS, clip_to_windows
from tracelens.model import COMPUTE_CATEGORIES, Trace

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
    components: dict[str, float]
    kernels: pl.DataFrame  # key, name, category, ns_per_step, count_per_step
    busbw: dict[str, float | None]
    skew_ns: dict[str, float | None]
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    per_device: dict[str, dict[str, float]] = field(default_factory=dict)  # median step


def _windows(trace: Trace) -> pl.DataFrame:
    """Step windows per rank, or one whole-span window per rank when steps are not marked."""
    if trace.steps.height:
        return trace.steps.select("rank", "step", "start_ns", "end_ns")
    return trace.events.group_by("rank").agg(start_ns=pl.col("start_ns").min(),
                                            end_ns=pl.col("end_ns").max()) \
        .with_columns(step=pl.lit(0, dtype=pl.Int32)).select("rank", "step", "start_ns",
                                                             "end_ns")


def component_frame(trace: Trace) -> pl.DataFrame:
    """Per (device, step): span and every component's ns (they add up to the span)."""
    ev = trace.events
    windows = _windows(trace)
    acts = collective_activities(ev).select(*DEVICE_KEYS, "start_ns", "end_ns", "type")
    types = [t for t in COLLECTIVE_ORDER if t in set(acts["type"].to_list())] + sorted(
        set(acts["type"].to_list()) - set(COLLECTIVE_ORDER))
    # One level per activity: its compute category, its collective type, or memory.
    leveled = pl.concat([
        ev.filter(pl.col("category").cast(pl.String).is_in(list(COMPUTE_CATEGORIES)))
        .select(*DEVICE_KEYS, "start_ns", "end_ns",
                level=pl.lit("compute:") + pl.col("category").cast(pl.String)),
        acts.select(*DEVICE_KEYS, "start_ns", "end_ns",
                    level=pl.lit("exposed_comm:") + pl.col("type")),
        ev.filter(pl.col("category") == "memory").select(*DEVICE_KEYS, "start_ns", "end_ns",
                                                         level=pl.lit("exposed_memory")),
    ])
    levels = [f"compute:{c}" for c in COMPUTE_CATEGORIES] + [f"exposed_comm:{t}" for t in
                                                             types] + ["exposed_memory"]
    clipped = clip_to_windows(leveled, windows)
    keys = [*DEVICE_KEYS, "step"]
    active = ev.select(DEVICE_KEYS).unique()
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
    return wide.with_columns(idle=pl.col("span_ns") - pl.sum_horizontal(levels))


_CLONE = re.compile(r"(\.kd)$|([._]clone(\.\d+)?)$")
_FUSION_SUFFIX = re.compile(r"[._]\d+$")


def normalize_kernel(name: str) -> str:
    """Match kernels across runs: strip ``.kd``, clone suffixes and XLA numeric suffixes."""
    prev = None
    while prev != name:
        prev = name
        name = _CLONE.sub("", name)
        name = _FUSION_SUFFIX.sub("", name)
    return name


def kernel_frame(trace: Trace, n_windows: int) -> pl.DataFrame:
    """Per normalized kernel (or op, when every event has one): time and count per
    device-step."""
    ev = clip_to_windows(trace.events, _windows(trace)) if trace.steps.height else trace.events
    names = ev.select("name", "op").unique()
    names = names.with_columns(key=pl.struct("name", "op").map_elements(
        lambda r: normalize_kernel(r["name"]), return_dtype=pl.String))
    ev = ev.join(names, on=["name", "op"], how="left", nulls_equal=True)
    return ev.group_by("key").agg(
        name=pl.col("name").first(), op=pl.col("op").drop_nulls().first(),
        category=pl.col("category").first().cast(pl.String),
        ns_per_step=(pl.col("end_ns") - pl.col("start_ns")).sum() / n_windows,
        count_per_step=pl.len() / n_windows,
    )


def profile(trace: Trace, path: str = "") -> RunProfile:
    comp = component_frame(trace)
    cols = [c for c in comp.columns if c not in (*DEVICE_KEYS, "step")]
    per_step = comp.group_by("step").agg([pl.col(c).cast(pl.Float64).mean() for c in cols]) \
        .sort("span_ns", "step")
    median = per_step.row((per_step.height - 1) // 2, named=True) if per_step.height else {}
    n_dev = trace.events.select(DEVICE_KEYS).unique().height
    n_steps = max(1, trace.steps.select("step").unique().height)
    components = {c: float(median.get(c) or 0.0) for c in cols if c != "span_ns"}
    per_device = {f"{r['host']}/GPU{r['device']}": {c: float(r[c]) for c in components}
                  for r in comp.filter(pl.col("step") == median.get("step")).iter_rows(
                      named=True)} if median else {}
    analysis = analyze_collectives(trace.events)
    acts = analysis.activities
    busbw = {r["type"]: r["b"] for r in acts.group_by("type").agg(
        b=pl.col("busbw_gb_per_s").median()).iter_rows(named=True)}
    skew = {r["type"]: r["s"] for r in analysis.instances.group_by("type").agg(
        s=pl.col("arrival_skew_ns").median()).iter_rows(named=True)}
    return RunProfile(
        path=path, devices=n_dev, hosts=trace.events["host"].n_unique(), steps=n_steps,
        step_ns=float(median.get("span_ns") or 0.0), components=components,
        kernels=kernel_frame(trace, max(1, n_dev * n_steps)), busbw=busbw, skew_ns=skew,
        stragglers=_stragglers(acts, n_dev * n_steps), per_device=per_device)


def _stragglers(acts: pl.DataFrame, device_steps: int) -> list[dict[str, Any]]:
    """Per device: share of its collectives where it arrived last, per type, and the waiting
    it caused per device-step (the others' waits in those instances, over all devices)."""
    if acts.is_empty():
        return []
    inst = ["instance_key", "occurrence"]
    last = acts.filter(pl.col("is_last")).select(*inst, *DEVICE_KEYS, "type")
    waits = acts.group_by(inst).agg(total_wait=pl.col("wait_ns").sum())
    caused = last.join(waits, on=inst).group_by(*DEVICE_KEYS, "type").agg(
        times_last=pl.len(), wait_ns=pl.col("total_wait").sum())
    counts = acts.group_by(*DEVICE_KEYS, "type").agg(instances=pl.len())
    rows = counts.join(caused, on=[*DEVICE_KEYS, "type"], how="left").with_columns(
        pl.col("times_last").fill_null(0), pl.col("wait_ns").fill_null(0),
    ).with_columns(wait_per_step_ns=pl.col("wait_ns") / device_steps) \
        .sort(["wait_ns", "times_last"], descending=True)
    return [dict(r) for r in rows.iter_rows(named=True)]


def _component_label(c: str) -> str:
    kind, _, what = c.partition(":")
    return {"compute": f"{what} compute", "exposed_comm": f"exposed {what}",
            "exposed_memory": "exposed memory traffic", "idle": "idle time"}[kind]


def transition(a: RunProfile, b: RunProfile, strong: bool = False) -> dict[str, Any]:
    """From run a to run b: efficiency, the lost time split into components, and a verdict.

    Weak scaling expects the same step time; strong scaling expects it to shrink by the device
    ratio, so there every component of a is scaled by devices(a)/devices(b) before comparing.
    """
    scale = a.devices / b.devices if strong else 1.0
    ideal = a.step_ns * scale
    eff = (ideal / b.step_ns) if b.step_ns else None
    keys = sorted(set(a.components) | set(b.components))
    causes = [{"component": k, "delta_ns": b.components.get(k, 0.0)
               - a.components.get(k, 0.0) * scale} for k in keys]
    lost = b.step_ns - ideal
    for c in causes:
        c["share"] = c["delta_ns"] / lost if lost else None
    causes.sort(key=lambda c: -c["delta_ns"])
    out = {"from": a.path, "to": b.path, "devices": [a.devices, b.devices],
           "efficiency": eff, "mode": "strong" if strong else "weak",
           "step_ns": [a.step_ns, b.step_ns], "delta_ns": lost,
           "causes": causes, "busbw": {t: [a.busbw.get(t), b.busbw.get(t)]
                                       for t in sorted(set(a.busbw) | set(b.busbw))},
           "arrival_skew_ns": {t: [a.skew_ns.get(t), b.skew_ns.get(t)]
                               for t in sorted(set(a.skew_ns) | set(b.skew_ns))},
           "stragglers": [s for s in b.stragglers if s["times_last"]][:5]}
    out["verdict"] = verdict(a, b, causes, lost)
    return out


def _concentration(a: RunProfile, b: RunProfile, comp: str) -> str:
    """", mostly on host/GPUn (+x ms there)" when one device holds most of a component's
    growth (summed over the new run's devices, each against the old run's average)."""
    base = a.components.get(comp, 0.0)
    growth = {dev: vals.get(comp, 0.0) - base for dev, vals in b.per_device.items()}
    total = sum(growth.values())
    if total <= 0 or len(growth) < 2:
        return ""
    dev, top = max(growth.items(), key=lambda kv: kv[1])
    if top / total < 0.5:
        return ""
    return f", mostly on {dev} (+{top / 1e6:.3f} ms per step there)"


def verdict(a: RunProfile, b: RunProfile, causes: list[dict[str, Any]],
            lost: float) -> list[str]:
    """A few ranked sentences naming the causes that explain most of the lost time."""
    if lost <= 0:
        return [f"step time did not grow ({a.step_ns / 1e6:.3f} → {b.step_ns / 1e6:.3f} ms)"]
    candidates: list[tuple[float, str]] = []
    residual = {c["component"]: c["delta_ns"] for c in causes}
    for s in b.stragglers:
        if s["instances"] and s["times_last"] / s["instances"] >= STRAGGLER_MIN_LAST:
            before = next((x["wait_per_step_ns"] for x in a.stragglers
                           if (x["host"], x["device"], x["type"]) ==
                           (s["host"], s["device"], s["type"])), 0.0)
            grown = s["wait_per_step_ns"] - before
            if grown / lost >= VERDICT_MIN_SHARE:
                key = f"exposed_comm:{s['type']}"
                residual[key] = residual.get(key, 0.0) - grown
                candidates.append((grown, (
                    f"{100 * grown / lost:.0f}% of the added step time is waiting for "
                    f"{s['host']}/GPU{s['device']}, which arrives last in "
                    f"{100 * s['times_last'] / s['instances']:.0f}% of {s['type']}s "
                    f"(the others wait {s['wait_ns'] / b.steps / 1e6:.3f} ms per step)")))
    for comp, delta in residual.items():
        if delta / lost < VERDICT_MIN_SHARE:
            continue
        text = f"{100 * delta / lost:.0f}% of the added step time is {_component_label(comp)}"
        text += _concentration(a, b, comp)
        if comp.startswith("exposed_comm:"):
            t = comp.partition(":")[2]
            before, after = a.busbw.get(t), b.busbw.get(t)
            if before and after:
                text += (f"; busbw {'fell' if after < before else 'rose'} from {before:,.0f} "
                         f"to {after:,.0f} GB/s")
        candidates.append((delta, text))
    candidates.sort(key=lambda c: -c[0])
    lines = [t for _, t in candidates[:4]]
    return lines or [f"step time grew {lost / 1e6:.3f} ms with no single component above "
                     f"{100 * VERDICT_MIN_SHARE:.0f}% of it"]
