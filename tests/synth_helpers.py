"""Shared helpers of the synthetic-trace tests: write a scenario, load it, compare with truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracelens
from tracelens_dev.writers.xspace import write
from tracelens.core.model import Trace
from tracelens_dev.synth import Synthetic, build
from tracelens_dev.synth.scenario import Scenario


def write_skewed_hosts(root: Path, starts: tuple[int | None, ...]) -> Path:
    """An XProf log directory of hosts ``n0``, ``n1``, ... whose clocks are 5 ms apart
    (``n<h>`` at h × 5 ms), each one GPU running three all-reduces after an add fusion,
    with the profile start given (None: no Task Environment, no wall clock)."""
    from tracelens_dev.writers.xspace import Activity, build_xspace

    run = root / "plugins" / "profile" / "r"
    run.mkdir(parents=True)
    for h, start in enumerate(starts):
        skew = h * 5_000_000
        acts = [Activity(0, 2, "ncclDevKernel_Generic_4(x)", skew + t, 400,
                         {"hlo_op": "all-reduce-start.1"}) for t in (1_000, 9_000, 17_000)]
        acts += [Activity(0, 1, "loop_add_fusion.kd", skew + t - 500, 450,
                          {"hlo_op": "loop_add_fusion"}) for t in (1_000, 9_000, 17_000)]
        (run / f"n{h}.xplane.pb").write_bytes(build_xspace(
            acts, host=f"n{h}", steps=[(0, skew, skew + 8_000)], profile_start_ns=start))
    return run


def write_and_load(syn: Synthetic, tmp: Path) -> tuple[Trace, list[Path]]:
    """Write the synthetic trace as XSpace (a file for one host, a log dir for several) and
    read it back through ``tracelens.load``."""
    if syn.scenario.hosts == 1:
        files = write(syn.trace, tmp / "synthetic.xplane.pb")
        return tracelens.load(files[0]), files
    files = write(syn.trace, tmp / "logs")
    return tracelens.load(tmp / "logs"), files


def by_category(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    return {r["category"]: {k: r[k] for k in ("count", "sum_ns", "exclusive_ns")} for r in rows}


def timeline_numbers(timeline: dict[str, Any]) -> dict[str, int]:
    """A summary timeline without its idle breakdown (checked here: its parts add up to idle)."""
    parts = timeline.get("idle_breakdown")
    if parts is not None:
        assert sum(parts.values()) == timeline["idle_ns"]
    return {k: v for k, v in timeline.items() if k != "idle_breakdown"}


def assert_summary_matches_truth(summary: dict[str, Any], truth: dict[str, Any],
                                 steps: bool = True) -> None:
    """Whole-trace timeline and categories and (``steps``) per-step timelines of every
    device, exactly."""
    got = {(d["host"], d["device"]): d for d in summary["devices"]}
    assert len(got) == len(truth["devices"])
    for want in truth["devices"]:
        key = (want["host"], want["device"])
        d = got[key]
        assert d["rank"] == want["rank"], key
        assert timeline_numbers(d["timeline"]) == want["timeline"], key
        assert by_category(d["categories"]) == by_category(want["categories"]), key
        if not steps:
            continue
        assert [(s["step"], s["start_ns"], s["end_ns"]) for s in d["steps"]] == [
            (s["step"], s["start_ns"], s["end_ns"]) for s in want["steps"]], key
        for gs, ws in zip(d["steps"], want["steps"]):
            assert timeline_numbers(gs["timeline"]) == ws["timeline"], (key, ws["step"])


def assert_step_categories_match(trace: Trace, truth: dict[str, Any]) -> None:
    """Per-step category numbers: ``summarize(step=s)`` restricts every number to the step."""
    steps = sorted({s["step"] for d in truth["devices"] for s in d["steps"]})
    for step in steps:
        got = {(d["host"], d["device"]): d
               for d in tracelens.summarize(trace, step=step)["devices"]}
        for want in truth["devices"]:
            ws = next(s for s in want["steps"] if s["step"] == step)
            key = (want["host"], want["device"])
            if not ws["categories"]:
                assert key not in got
                continue
            assert by_category(got[key]["categories"]) == by_category(ws["categories"]), (
                key, step)


def collective_rows(trace: Trace) -> pl.DataFrame:
    """Collective kernels with their per-device occurrence index of the same op."""
    return (trace.events.filter(pl.col("category") == "collective")
            .sort("rank", "device", "start_ns")
            .with_columns(k=pl.int_range(pl.len()).over("rank", "device", "op"),
                          dur=pl.col("end_ns") - pl.col("start_ns")))


def synthetic(**kw: Any) -> Synthetic:
    return build(Scenario(**kw))


# -- costs (the program's HLO) -----------------------------------------------------------------

COST_COLUMNS = ("flops", "bytes", "msg_bytes", "group_size")
HLO_PROBLEMS = ("HLO", "cost of", "no cost")


def hlo_warnings(trace: Trace) -> list[str]:
    """Warnings about the trace's HLO (undecodable modules, ops missing from it, ...)."""
    return [w for w in trace.meta.warnings if any(k in w for k in HLO_PROBLEMS)]


def assert_costs_match_truth(trace: Trace, truth: dict[str, Any]) -> None:
    """Every activity carries exactly the truth's flops, bytes, msg_bytes and group_size for
    its (op, kind, kernel name), null where the truth says null; the HLO raised no warning."""
    assert hlo_warnings(trace) == []
    want = {(r["op"], r["kind"], r["name"]): tuple(r[c] for c in COST_COLUMNS)
            for r in truth["activity_costs"]}
    got = (trace.events.select("op", pl.col("kind").cast(pl.String), "name", *COST_COLUMNS)
           .unique().rows())
    seen = set()
    for op, kind, name, *cost in got:
        key = (op, kind, name)
        assert key not in seen, f"{key}: several costs"
        seen.add(key)
        assert key in want, key
        assert tuple(cost) == want[key], (key, cost, want[key])
    assert seen == set(want)
    # Model ops (GEMMs, cuDNN attention) compute in bf16: MFU's dominant dtype.
    dtypes = {o["op"]: o["dtype"] for o in truth["ops"] if o["dtype"] is not None}
    got_dtypes = trace.events.filter(pl.col("op").is_in(list(dtypes))).select("op", "dtype") \
        .unique().rows()
    assert len(got_dtypes) == len(dtypes) and all(d == dtypes[op] for op, d in got_dtypes)


def assert_mfu_matches_truth(trace: Trace, truth: dict[str, Any], steps: bool = True) -> None:
    """Model FLOPs and MFU per device (whole trace) and (``steps``) per step, as the truth
    computes them (float sums in another order: relative 1e-9)."""
    from tracelens.analyze.compute.roofline import device_specs, mfu, spec_frame

    specs = spec_frame(device_specs(trace.devices))
    whole = {(r["host"], r["device"]): r for r in mfu(trace.events, specs).iter_rows(named=True)}
    per_step = {(r["host"], r["device"], r["step"]): r
                for r in mfu(trace.events, specs, trace.steps).iter_rows(named=True)}
    for d in truth["devices"]:
        got = whole[(d["host"], d["device"])]
        assert got["model_flops"] == pytest.approx(d["model_flops"], rel=1e-12)
        assert got["model_kernels_without_cost"] == d["model_kernels_without_flops"]
        assert got["mfu"] == pytest.approx(d["mfu"], rel=1e-9)
        assert got["mfu_dtype"] == "bf16"
        for s in d["steps"] if steps else ():
            gs = per_step[(d["host"], d["device"], s["step"])]
            if s["model_flops"] == 0:
                assert not gs["model_flops"]
                continue
            assert gs["model_flops"] == pytest.approx(s["model_flops"], rel=1e-9)
            assert gs["mfu"] == pytest.approx(s["mfu"], rel=1e-9)


def assert_busbw_matches_truth(trace: Trace, truth: dict[str, Any]) -> None:
    """Every matched collective instance: message size, group size, transfer time and busbw
    (msg_bytes / transfer × the nccl-tests factor) as constructed. The analysis matches the
    k-th execution of an op across all devices, so a per-host collective (the MoE all-to-all)
    on several hosts is one instance whose transfer is the shortest of its groups'."""
    from tracelens.analyze.communication.collectives import analyze_collectives
    from tracelens_dev.synth.costs import bus_factor

    groups: dict[tuple[str, int], list[dict]] = {}
    for inst in truth["collective_instances"]:
        groups.setdefault((inst["op"], inst["step"]), []).append(inst)
    inst = analyze_collectives(trace.events).instances
    assert inst.height == len(groups)
    for r in inst.iter_rows(named=True):
        w = groups[(r["op"], r["occurrence"])]  # each op runs once per step
        transfer = min(x["transfer_ns"] for x in w)
        assert (r["msg_bytes"], r["group_size"], r["transfer_ns"]) == (
            w[0]["msg_bytes"], w[0]["group_size"], transfer), r["op"]
        want = w[0]["busbw_gb_per_s"] if len(w) == 1 else \
            w[0]["msg_bytes"] / transfer * bus_factor(w[0]["type"], w[0]["group_size"])
        assert r["busbw_gb_per_s"] == pytest.approx(want, rel=1e-12, abs=1e-12), r["op"]


def writer_events(rows: list[tuple], columns: tuple[str, ...] = (
        "kind", "name", "start_ns", "end_ns", "op"), host: str | pl.Expr = "h") -> pl.DataFrame:
    """Device activity for the trace writers from ``rows`` (of ``columns``): device 0,
    stream 7, rank 0 unless given, every model column the rows do not set unknown."""
    ev = pl.DataFrame(rows, schema=list(columns), orient="row")
    fill = {"host": pl.lit(host) if isinstance(host, str) else host, "rank": pl.lit(0),
            "device": pl.lit(0), "stream": pl.lit(7), "op": pl.lit(None, pl.String),
            "category": pl.lit(None, pl.String), "subcategory": pl.lit(None, pl.String),
            "bytes": pl.lit(None, pl.Float64), "msg_bytes": pl.lit(None, pl.Int64),
            "group_size": pl.lit(None, pl.Int32), "dtype": pl.lit(None, pl.String)}
    return ev.with_columns(**{k: v for k, v in fill.items() if k not in columns})


def writer_device(vendor: str, arch: str, product: str, compute_units: int, memory: int,
                  host: str = "h", rank: int = 0) -> dict[str, Any]:
    """One row of a devices frame for the trace writers (clock and spec unknown)."""
    return {"host": host, "rank": rank, "device": 0, "vendor": vendor, "arch": arch,
            "product": product, "compute_units": compute_units, "clock_mhz": None,
            "memory_bytes": memory, "spec_id": None}


def write_scaling_pair(root: Path, fmt: str = "xspace") -> tuple[Path, Path]:
    """The planted 8 -> 64 GPU pair (``tracelens_dev.synth.scaling_pair``, issue 45): both runs
    under ``root`` (``n8``, ``n64``) in ``fmt``: ``xspace`` (an XProf log
    directory per run, a file per host) or ``kineto`` (a JSON file per rank)."""
    from tracelens_dev.synth.scaling_pair import large_trace, small_trace
    from tracelens_dev.writers import kineto, xspace

    out = []
    for name, make in (("n8", small_trace), ("n64", large_trace)):
        if fmt == "xspace":
            xspace.write(make(), root / name, layout="logdir", run="run1")
        elif fmt == "kineto":
            kineto.write(make(per_rank=True), root / name)
        else:
            raise ValueError(f"unknown format {fmt!r}")
        out.append(root / name)
    return out[0], out[1]
