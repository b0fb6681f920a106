"""The ``summarize`` result: a plain, JSON-ready dict whose shape is a documented contract.

Renderers (terminal, JSON, CSV, Markdown) in ``reports/`` only format what this returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tracelens.version import __version__
from tracelens.analyze.roofline import (COVERAGE_FLOOR, clip_costs_to_windows, device_specs,
                                        flops_coverage, mfu, no_cost_data, roofline,
                                        roofline_rows, spec_frame, without_flops)
from tracelens.analyze.collectives import collective_activities
from tracelens.analyze.idle import IDLE_PARTS, idle_breakdown, idle_intervals
from tracelens.analyze.timeline import (DEVICE_KEYS, TIMELINE_COLUMNS, Breakdown,
                                        device_breakdown, step_breakdown)
from tracelens.hardware import GpuSpec, load_specs_file
from tracelens.model import Trace
from tracelens.notices import fold_per_host


def _timeline_dict(row: dict[str, Any]) -> dict[str, int]:
    return {k: int(row[k]) for k in TIMELINE_COLUMNS}


def _select(trace: Trace, device: int | None, step: int | None) -> tuple[pl.DataFrame,
                                                                          pl.DataFrame]:
    events, steps = trace.events, trace.steps
    if device is not None:
        events = events.filter(pl.col("device") == device)
    if step is not None:
        steps = steps.filter(pl.col("step") == step)
        events = clip_costs_to_windows(events, steps) if steps.height else events.head(0)
    return events, steps


def summarize(trace: Trace, device: int | None = None, step: int | None = None,
              top: int = 10, gpu: str | None = None,
              gpu_specs: str | Path | dict[str, GpuSpec] | None = None) -> dict[str, Any]:
    """Headline, per-device timeline and categories, per-step timelines, top kernels,
    roofline per op group and MFU per device and step.

    ``device`` keeps one GPU ordinal (on every host); ``step`` restricts every number to that
    step's window (its span is the step's bounds). ``gpu`` forces a GPU spec for every device
    and ``gpu_specs`` adds or replaces specs (a TOML/JSON file or loaded specs), see
    ``tracelens.hardware``.
    """
    events, steps = _select(trace, device, step)
    # the whole trace's collective activities, computed once for the collectives lines (when
    # no filter narrows the events) and the HLO findings (always the whole trace)
    unfiltered = events is trace.events
    whole_acts = collective_activities(trace.events) \
        if unfiltered or trace.modules.height else None
    devices = trace.devices
    if device is not None:
        devices = devices.filter(pl.col("device") == device)
    active = events.select(DEVICE_KEYS).unique()
    per_step = step_breakdown(events, steps, active)
    if step is not None:
        whole = Breakdown(per_step.timeline.drop("step", "start_ns", "end_ns"),
                          per_step.categories.drop("step"))
    else:
        whole = device_breakdown(events)
    idle_whole, idle_step = _idle(trace, device, steps, step)
    dev_info = {(r["host"], r["rank"], r["device"]): r for r in devices.iter_rows(named=True)}
    extra = load_specs_file(gpu_specs) if isinstance(gpu_specs, (str, Path)) else gpu_specs
    specs = device_specs(devices, gpu=gpu, extra=extra)
    specs_df = spec_frame(specs)
    mfu_dev = {(r["host"], r["rank"], r["device"]): r for r in (
        mfu(events, specs_df, steps) if step is not None else mfu(events, specs_df)
    ).iter_rows(named=True)}
    mfu_step = {(r["host"], r["rank"], r["device"], r["step"]): r["mfu"] for r in (
        mfu(events, specs_df, steps).iter_rows(named=True) if steps.height else [])}
    coverage = {(r["host"], r["rank"], r["device"]): r for r in
                flops_coverage(events).iter_rows(named=True)}
    cats_by_dev: dict[tuple, list[dict[str, Any]]] = {}
    for r in whole.categories.filter(pl.col("count") > 0).sort(
            "exclusive_ns", descending=True).iter_rows(named=True):
        cats_by_dev.setdefault((r["host"], r["rank"], r["device"]), []).append(
            {"category": r["category"], "count": r["count"], "sum_ns": r["sum_ns"],
             "exclusive_ns": r["exclusive_ns"]})
    steps_by_dev: dict[tuple, list[dict[str, Any]]] = {}
    for r in per_step.timeline.sort("rank", "device", "start_ns").iter_rows(named=True):
        steps_by_dev.setdefault((r["host"], r["rank"], r["device"]), []).append(
            {"step": r["step"], "start_ns": r["start_ns"], "end_ns": r["end_ns"],
             "timeline": {**_timeline_dict(r), "idle_breakdown": idle_step.get(
                 (r["host"], r["rank"], r["device"], r["step"]), _no_idle())},
             "mfu": _round(mfu_step.get((r["host"], r["rank"], r["device"], r["step"])))})
    out_devices = []
    for r in whole.timeline.sort("rank", "device").iter_rows(named=True):
        key = (r["host"], r["rank"], r["device"])
        info = dev_info.get(key, {})
        out_devices.append({
            "host": r["host"], "rank": r["rank"], "device": r["device"],
            "vendor": info.get("vendor"), "arch": info.get("arch"),
            "product": info.get("product"),
            "timeline": {**_timeline_dict(r),
                         "idle_breakdown": idle_whole.get(key, _no_idle())},
            "categories": cats_by_dev.get(key, []),
            "steps": steps_by_dev.get(key, []),
            "spec": _spec_dict(specs.get(key)),
            **_mfu_dict(mfu_dev.get(key)),
            **_coverage_dict(coverage.get(key)),
        })
        d = out_devices[-1]
        d["mfu_lower_bound"] = d["mfu"] is not None and (
            d["model_kernels_without_cost"] > 0
            or (d["flops_coverage"] is not None and d["flops_coverage"] < COVERAGE_FLOOR))
    active_keys = {(d["host"], d["rank"], d["device"]) for d in out_devices}
    idle = [{"host": h, "rank": rk, "device": d} for (h, rk, d) in sorted(dev_info)
            if (h, rk, d) not in active_keys]
    headline = _headline(out_devices, idle, devices, steps, per_step)
    gaps = without_flops(events)
    warnings = fold_per_host(trace.meta.warnings, _host_names(trace))
    warnings += _coverage_warning(out_devices, gaps, headline["totals"]["busy_ns"])
    return {
        "tracelens_version": __version__,
        "inputs": trace.meta.sources,
        "alignment": trace.meta.alignment,
        "steps_source": trace.meta.steps_source,
        "warnings": warnings,
        "filters": {"device": device, "step": step},
        "headline": headline,
        "devices": out_devices,
        "idle_devices": idle,
        "top_kernels": _top_kernels(events, top),
        "collectives": _collectives(events, trace.meta.alignment,
                                    whole_acts if unfiltered else None),
        "hlo_findings": _hlo_findings(trace, whole_acts),
        "roofline": roofline_rows(roofline(events, specs_df), top),
        "no_cost_data": int(events.select(no_cost_data().sum()).item() or 0)
        if events.height else 0,
        "no_cost_data_ns": int(events.filter(no_cost_data()).select(
            (pl.col("end_ns") - pl.col("start_ns")).sum()).item() or 0) if events.height else 0,
        "no_flops": _no_flops_by_category(gaps, headline["totals"]["busy_ns"]),
    }


def _host_names(trace: Trace) -> list[str]:
    """What names a host in warnings: its host name and its file's name (and stem)."""
    names = [str(h) for h in trace.devices["host"].unique().to_list()]
    for src in trace.meta.sources:
        base = Path(src["path"]).name
        names += [base, base.split(".")[0]]
    return names


def _no_idle() -> dict[str, int]:
    return {f"{p}_ns": 0 for p in IDLE_PARTS}


def _idle(trace: Trace, device: int | None, steps: pl.DataFrame, step: int | None
          ) -> tuple[dict[tuple, dict[str, int]], dict[tuple, dict[str, int]]]:
    """Idle parts per device (whole window, or the one selected step) and per device × step.

    Gaps are attributed on the unclipped events: the activity that ends a gap at a step's
    end lies in the next step."""
    events = trace.events
    if device is not None:
        events = events.filter(pl.col("device") == device)
    parts = idle_intervals(events, trace.host_events)
    cols = [f"{p}_ns" for p in IDLE_PARTS]
    per_step = {(r["host"], r["rank"], r["device"], r["step"]): {c: int(r[c]) for c in cols}
                for r in idle_breakdown(parts, events, steps).iter_rows(named=True)} \
        if steps.height else {}
    if step is not None:
        whole = {k[:3]: v for k, v in per_step.items()}
    else:
        whole = {(r["host"], r["rank"], r["device"]): {c: int(r[c]) for c in cols}
                 for r in idle_breakdown(parts, events).iter_rows(named=True)}
    return whole, per_step


def _coverage_dict(row: dict[str, Any] | None) -> dict[str, Any]:
    row = row or {}
    return {"flops_coverage": _round(row.get("flops_coverage")),
            "compute_kernel_ns": int(row.get("compute_kernel_ns") or 0),
            "flops_covered_ns": int(row.get("covered_ns") or 0)}


def _share(ns: int, busy: int) -> float | None:
    return round(100.0 * ns / busy, 3) if busy else None


def _no_flops_by_category(gaps: pl.DataFrame, busy: int) -> list[dict[str, Any]]:
    """Compute kernels without FLOPs per category: count, summed time, share of busy time."""
    if gaps.is_empty():
        return []
    per = gaps.group_by("category").agg(pl.col("count").sum(), pl.col("sum_ns").sum()) \
        .sort(["sum_ns", "category"], descending=[True, False])
    return [{"category": r["category"], "count": int(r["count"]), "sum_ns": int(r["sum_ns"]),
             "share_of_busy_pct": _share(int(r["sum_ns"]), busy)}
            for r in per.iter_rows(named=True)]


def _coverage_warning(devs: list[dict[str, Any]], gaps: pl.DataFrame, busy: int,
                      top: int = 5) -> list[str]:
    """One warning when some device's FLOPs cover under 95% of its compute-kernel time: the
    categories and ops without FLOPs, their share of busy time and why; MFU a lower bound."""
    low = [d for d in devs if d["flops_coverage"] is not None
           and d["flops_coverage"] < COVERAGE_FLOOR]
    if not low:
        return []
    worst = min(low, key=lambda d: (d["flops_coverage"], d["rank"], d["device"]))
    total = sum(d["compute_kernel_ns"] for d in devs)
    covered = sum(d["flops_covered_ns"] for d in devs)
    cats = ", ".join(f"{c['category']} {c['share_of_busy_pct']:.1f}%"
                     for c in _no_flops_by_category(gaps, busy))
    ops = gaps.group_by("op", "category").agg(pl.col("sum_ns").sum(),
                                              pl.col("cost_note").drop_nulls().sort().first()) \
        .sort(["sum_ns", "op"], descending=[True, False]).head(top)
    by_note: dict[str, list[str]] = {}  # ops sharing a reason listed together, longest first
    for r in ops.iter_rows(named=True):
        by_note.setdefault(r["cost_note"] or "no reason recorded", []).append(
            f"{r['op']} ({r['category']}, {_share(r['sum_ns'], busy) or 0:.1f}%)")
    op_text = "; ".join(f"{', '.join(v)}: {k}" for k, v in by_note.items())
    return [f"FLOPs cover {100.0 * covered / total:.1f}% of compute-kernel time ({len(low)} "
            f"device(s) under {COVERAGE_FLOOR:.0%}, lowest {worst['host']}/GPU{worst['device']} "
            f"{100.0 * worst['flops_coverage']:.1f}%), so MFU is a lower bound. Without FLOPs, "
            f"as a share of busy time: {cats}. Largest: {op_text}"]


def _collectives(events: pl.DataFrame, alignment: str, acts: pl.DataFrame | None
                 ) -> dict[str, Any]:
    """The top lines of ``tracelens collectives``: per type, and the devices others waited for."""
    from tracelens.analyze.collectives import collectives_report

    rep = collectives_report(events, alignment, top=0, acts=acts)
    return {"by_type": rep["by_type"],
            "stragglers": [s for s in rep["stragglers"] if s["times_last"]][:3]}


def _median(values: list[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    return known[(len(known) - 1) // 2] if known else None


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(float(x), digits)


def _spec_dict(spec: GpuSpec | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    d = spec.to_dict()
    return {k: d[k] for k in ("id", "name", "peak_tflops", "hbm_tb_per_s", "link_gb_per_s",
                              "memory_gb", "source")}


def _mfu_dict(row: dict[str, Any] | None) -> dict[str, Any]:
    row = row or {}
    return {"mfu": _round(row.get("mfu")), "mfu_dtype": row.get("mfu_dtype"),
            "model_flops": row.get("model_flops"),
            "model_kernels_without_cost": int(row.get("model_kernels_without_cost") or 0)}


def _headline(devs: list[dict[str, Any]], idle: list[dict[str, Any]], devices: pl.DataFrame,
              steps: pl.DataFrame, per_step: Breakdown) -> dict[str, Any]:
    tot = {k: sum(d["timeline"][k] for d in devs) for k in TIMELINE_COLUMNS}
    span = tot["span_ns"]

    def pct(x: int) -> float | None:
        return round(100.0 * x / span, 3) if span else None

    products = devices.group_by("product", "arch", "vendor").len().sort("len", descending=True)
    step_ns = (steps["end_ns"] - steps["start_ns"]) if steps.height else None
    return {
        "hosts": len({d["host"] for d in devs} | {d["host"] for d in idle}),
        "devices": len(devs) + len(idle),
        "active_devices": len(devs),
        "hardware": [{"product": r["product"], "arch": r["arch"], "vendor": r["vendor"],
                      "count": r["len"]} for r in products.iter_rows(named=True)],
        "steps": steps["step"].n_unique() if steps.height else 0,
        "median_step_ns": int(step_ns.median()) if step_ns is not None else None,
        "max_span_ns": max((d["timeline"]["span_ns"] for d in devs), default=0),
        "busy_pct": pct(tot["busy_ns"]),
        "compute_pct": pct(tot["compute_ns"]),
        "exposed_comm_pct": pct(tot["exposed_comm_ns"]),
        "exposed_memory_pct": pct(tot["exposed_memory_ns"]),
        "idle_pct": pct(tot["idle_ns"]),
        # the median device's MFU (model FLOPs / (span × dense peak)); null when unknown
        "mfu": _median([d.get("mfu") for d in devs]),
        "mfu_lower_bound": any(d.get("mfu_lower_bound") for d in devs),
        "flops_coverage": _round(sum(d["flops_covered_ns"] for d in devs)
                                 / sum(d["compute_kernel_ns"] for d in devs))
        if sum(d["compute_kernel_ns"] for d in devs) else None,
        "totals": tot,
    }


def _top_kernels(events: pl.DataFrame, top: int) -> list[dict[str, Any]]:
    if events.is_empty():
        return []
    dur = pl.col("end_ns") - pl.col("start_ns")
    total = int(events.select(dur.sum()).item())
    # Grouped on categorical codes (strings hashed once each), per device first so that the
    # device count is a plain count of groups.
    keys = ["name", "category", "subcategory", "rule"]
    cat = pl.Categorical
    coded = events.select(pl.col("name").cast(cat), "category",
                          pl.col("subcategory").cast(cat), pl.col("rule").cast(cat),
                          pl.col("host").cast(cat), "rank", "device", _d=dur)
    agg = (coded.group_by(*keys, *DEVICE_KEYS).agg(count=pl.len(), sum_ns=pl.col("_d").sum())
           .group_by(keys).agg(pl.col("count").sum(), pl.col("sum_ns").sum(), devices=pl.len())
           .with_columns(pl.col("name", "subcategory", "rule").cast(pl.String))
           .sort(["sum_ns", "name"], descending=[True, False]).head(top))
    return [{"name": r["name"], "category": r["category"], "subcategory": r["subcategory"],
             "rule": r["rule"], "count": int(r["count"]), "sum_ns": int(r["sum_ns"]),
             "mean_ns": round(r["sum_ns"] / r["count"], 1),
             "share_pct": round(100.0 * r["sum_ns"] / total, 3) if total else None,
             "devices": int(r["devices"])} for r in agg.iter_rows(named=True)]


def _hlo_findings(trace: Trace, acts: pl.DataFrame | None, top: int = 3
                  ) -> list[dict[str, Any]]:
    """The costliest ``tracelens hlo`` findings of the whole trace (filters do not apply)."""
    from tracelens.analyze.hlo_findings import finding_json, top_findings

    return [finding_json(f) for f in top_findings(trace, top, acts)]
