"""Real TPU v5e traces (sample_traces/tpu, made by make_tpu_traces.py on a TPU through the
device tool): each reads as a device timeline with steps, busy time, categories and MFU, and
where XProf's definitions agree with ours (step time, device busy time, op time and FLOPs per
XLA category, FLOPs utilization) the numbers equal XProf's own converters on the same file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import tracelens
from parsers.xspace.tpu import LANE_STREAM
from tracelens.cli.commands import main

TPU = Path(__file__).resolve().parent.parent / "sample_traces" / "tpu"
TRACES = ("remat", "flash", "sync", "multi")


def _path(name: str) -> Path:
    return TPU / f"{name}.xplane.pb"


def _ops(trace: tracelens.Trace) -> pl.DataFrame:
    """The ``XLA Ops`` line's events (the async spans are on lanes from LANE_STREAM up)."""
    return trace.events.filter(pl.col("stream") < LANE_STREAM)


@pytest.fixture(scope="module")
def loaded() -> dict[str, tracelens.Trace]:
    return {n: tracelens.load(_path(n)) for n in TRACES}


@pytest.mark.parametrize("name", TRACES)
def test_tpu_trace_summarizes(name: str, loaded: dict[str, tracelens.Trace]) -> None:
    trace = loaded[name]
    s = tracelens.summarize(trace)
    assert s["steps_source"] == "device-steps"
    (d,) = s["devices"]
    # named as the trace names it (device_type_string), the table's entry found for it
    assert d["product"] == "TPU v5 Lite" and trace.devices["spec_id"].to_list() == ["tpu-v5e"]
    # the plane's own peaks, not the table's 197 TFLOP/s
    assert d["spec"]["peak_tflops"]["bf16"] == pytest.approx(202.7)
    assert d["spec"]["hbm_tb_per_s"] == pytest.approx(0.8191576375296)
    busy = d["timeline"]["busy_ns"] / d["timeline"]["span_ns"]
    # the host reads the loss every step in sync: the device waits for it between steps
    assert 0.85 < busy < 0.95 if name == "sync" else busy > 0.99
    cats = {c["category"]: c for c in d["categories"]}
    assert cats["gemm"]["sum_ns"] > 0.5 * d["timeline"]["busy_ns"]
    assert "memory" in cats and "other" not in cats or cats["other"]["sum_ns"] < 0.05 * \
        d["timeline"]["busy_ns"]
    assert 0.3 < d["mfu"] < 0.9
    assert len(d["steps"]) == 4
    if name == "flash":  # the Pallas flash-attention kernels
        assert cats["attention"]["sum_ns"] > 0.2 * d["timeline"]["busy_ns"]
        ops = trace.events.filter(pl.col("category") == "attention")["op"].cast(pl.String)
        assert ops.str.contains("flash").all()  # flash_attention.N, flash_mha_bwd_*
    ev = trace.events
    assert ev["hlo_category"].null_count() == 0 and ev["module"].null_count() == 0
    assert _ops(trace)["flops"].null_count() == 0
    spans = ev.filter(pl.col("stream") >= LANE_STREAM)  # async copies and slices in flight
    assert spans.height and set(spans["category"].cast(pl.String)) == {"memory"}
    assert spans["hlo_category"].cast(pl.String).is_in(["copy-start", "async-start"]).all()
    # most of the in-flight time is under compute: exposed memory is far below memory time
    t = d["timeline"]
    assert t["exposed_memory_ns"] < 0.5 * t["memory_ns"]


def test_host_dispatch_annotations_are_not_the_steps(loaded: dict[str, tracelens.Trace]
                                                     ) -> None:
    """JAX dispatches asynchronously: the host's StepTraceAnnotation windows of remat last
    0.2-0.6 ms while the device runs 11.26 ms steps; the device's Steps line is used and the
    annotation is passed over by the check every step source gets."""
    trace = loaded["remat"]
    assert trace.meta.steps_source == "device-steps"
    dur = (trace.steps["end_ns"] - trace.steps["start_ns"]).to_list()
    assert all(11_200_000 < x < 11_300_000 for x in dur)
    assert trace.steps["candidate"].to_list() == [0, 0, 0, 0]


# -- XProf's own converters on the same files ----------------------------------------------

def _xprof(path: Path, tool: str, tmp: Path, options: dict | None = None) -> object:
    pytest.importorskip("xprof", reason="XProf (the reference converters) is not installed")
    from xprof.convert import raw_to_tool_data

    dst = tmp / tool / path.name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, dst)  # the converter writes cache files next to its input
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(dst)], tool, options or {})
    assert data is not None, tool
    return json.loads(data)


def _op_profile_equal(name: str, trace: tracelens.Trace, d: dict, tmp_path: Path) -> None:
    """Op time and FLOPs per XLA category, device busy time and FLOPs utilization equal
    XProf's ``op_profile`` of the same file."""
    prof = _xprof(_path(name), "op_profile", tmp_path, {"group_by": "category"})
    by_cat = {c["name"]: c["metrics"] for c in prof["byCategory"]["children"]}
    idle_ps = by_cat.pop("IDLE", {}).get("rawTime", 0)
    ours = _ops(trace).group_by(cat=pl.col("hlo_category").cast(pl.String)).agg(
        ns=(pl.col("end_ns") - pl.col("start_ns")).sum(), flops=pl.col("flops").sum(),
        n=pl.len())
    ours = {r["cat"]: r for r in ours.iter_rows(named=True)}
    assert set(ours) == set(by_cat)
    for cat, m in by_cat.items():  # op time and FLOPs per XLA category
        # our times are whole ns (each event's ps start and end floored): up to 1 ns an event
        assert ours[cat]["ns"] == pytest.approx(m["rawTime"] / 1000, rel=0.01,
                                                abs=ours[cat]["n"]), cat
        assert ours[cat]["flops"] == pytest.approx(m.get("rawFlops", 0), rel=0.01), cat
    # device busy time: XProf's op time over the profile less its idle
    busy_ps = sum(m["rawTime"] for m in by_cat.values())
    assert d["timeline"]["busy_ns"] == pytest.approx(busy_ps / 1000, rel=0.01)
    assert prof["byCategory"]["metrics"]["rawTime"] - idle_ps == busy_ps
    # XProf's FLOPs utilization is FLOPs over op time (idle left out) at the plane's peak:
    # ours on our busy time and our peak
    flops = _ops(trace)["flops"].sum()
    assert flops / (d["timeline"]["busy_ns"] * 1e-9 * d["spec"]["peak_tflops"]["bf16"] * 1e12) \
        == pytest.approx(prof["byCategory"]["metrics"]["flops"], rel=0.01)


@pytest.mark.parametrize("name", TRACES)
def test_tpu_numbers_equal_xprof(name: str, loaded: dict[str, tracelens.Trace],
                                 tmp_path: Path) -> None:
    trace = loaded[name]
    s = tracelens.summarize(trace)
    (d,) = s["devices"]
    _op_profile_equal(name, trace, d, tmp_path)
    overview = _xprof(_path(name), "overview_page", tmp_path)
    steps = next(t for t in overview if t.get("p", {}).get("steptime_ms_average"))
    cols = [c["id"] for c in steps["cols"]]
    theirs = {}
    for row in steps["rows"]:
        r = dict(zip(cols, (c.get("v") if c else None for c in row["c"])))
        step_ms = float(re.search(r"Step time = ([\d.]+) ms", r["tooltip"]).group(1))
        theirs[int(r["stepnum"])] = (step_ms, r["tcComputeTimeMs"])
    mine = {st["step"]: st for st in d["steps"]}
    # multi: the Steps line has one event per program run (8: the grads and the update
    # program of each of 4 steps), grouped into the host's 4 annotated steps as XProf does
    assert set(mine) == set(theirs)
    for k, (step_ms, compute_ms) in theirs.items():
        t = mine[k]["timeline"]
        assert t["span_ns"] == pytest.approx(step_ms * 1e6, rel=0.01), k
        assert t["busy_ns"] == pytest.approx(compute_ms * 1e6, rel=0.01), k
    assert sum(st["timeline"]["span_ns"] for st in d["steps"]) / len(d["steps"]) == \
        pytest.approx(float(steps["p"]["steptime_ms_average"]) * 1e6, rel=0.01)
    assert s["headline"]["median_step_ns"] == pytest.approx(
        sorted(ms for ms, _ in theirs.values())[(len(theirs) - 1) // 2] * 1e6, rel=0.01)


@pytest.mark.parametrize("name", (*TRACES, "eager_block"))
def test_tpu_roofline_equals_xprofs_roofline_model(name: str, tmp_path: Path) -> None:
    """Per op, where XProf's roofline model says an op is bound by compute or by HBM, our
    roofline says the same bound and the same efficiency (within 1%): the HBM bytes are the
    ``memory_access_breakdown``'s HBM share (XLA's ``bytes_accessed`` counts VMEM too, and
    put fused GEMMs at 114.8% of an HBM roof on remat), an op that moves no HBM bytes is
    compute-bound, a tuple result's ``f32`` is not the GEMM's input type. Async start/done
    ops are rated by XProf (up to 4096x of HBM bandwidth: their bytes over their few ns) and
    not by us; XProf's ops bound by VMEM are left out (we model no VMEM roof)."""
    table = _xprof(_path(name), "roofline_model", tmp_path)[0]
    cols = [c["id"] for c in table["cols"]]
    rows = [dict(zip(cols, (c.get("v") if c else None for c in r["c"]))) for r in table["rows"]]
    theirs = pl.DataFrame(
        [{"op": r["operation"], "category": r["category"], "bound_by": r["bound_by"],
          "eff": r["roofline_efficiency"], "time_us": r["total_time"],
          "program_id": int(r["hlo_module_id"])} for r in rows
         if r["step"] == "Total" and r["hlo_module_id"] and r["category"] != "Program"],
        schema_overrides={"program_id": pl.UInt64}).with_columns(
        pl.col("program_id").reinterpret(signed=True))
    ours = tracelens.TraceAnalysis(_path(name)).roofline.select(
        "op", "program_id", "bound", "efficiency")
    j = theirs.filter(pl.col("bound_by").is_in(["Compute", "HBM"])).join(
        ours, on=["op", "program_id"], how="left")
    rated = j.filter(pl.col("bound").is_not_null())
    assert rated.height >= 40
    assert (rated["bound"] == rated["bound_by"].replace({"Compute": "compute",
                                                         "HBM": "memory"})).all()
    assert ((rated["efficiency"] / rated["eff"] - 1).abs() < 0.01).all()
    # what we leave unrated of it: the async ops, and ops of an input type without a peak
    left = j.filter(pl.col("bound").is_null() & ~pl.col("category").str.contains(
        r"-(start|done)$"))
    assert left["time_us"].sum() <= 0.05 * j["time_us"].sum()


def test_an_op_without_a_memory_breakdown_keeps_all_its_bytes_and_says_so(tmp_path: Path
                                                                          ) -> None:
    """Where an op carries no ``memory_access_breakdown`` its bytes are XLA's
    ``bytes_accessed`` (every memory space): kept, and the reader says how many ops."""
    from parsers.xplane_schema import xspace_class
    from tracelens_dev.writers.xspace import TpuLayout, build_tpu_xspace

    with_breakdown = tmp_path / "with.xplane.pb"
    with_breakdown.write_bytes(build_tpu_xspace(TpuLayout(chips=1)))
    xs = xspace_class()()
    xs.ParseFromString(with_breakdown.read_bytes())
    stripped = 0
    for plane in xs.planes:
        ref = [k for k, v in plane.stat_metadata.items() if v.name == "memory_access_breakdown"]
        for md in plane.event_metadata.values():
            keep = [st for st in md.stats if st.metadata_id not in ref]
            stripped += len(md.stats) - len(keep)
            del md.stats[:]
            md.stats.extend(keep)
    without = tmp_path / "without.xplane.pb"
    without.write_bytes(xs.SerializeToString())
    a, b = tracelens.load(with_breakdown), tracelens.load(without)
    assert stripped and not [n for n in a.meta.notices if n.code == "xspace.tpu_bytes_all_spaces"]
    (note,) = [n for n in b.meta.notices if n.code == "xspace.tpu_bytes_all_spaces"]
    assert f"{stripped} ops carry no memory_access_breakdown" in note.text
    # the writer's breakdown is all HBM: the same bytes either way
    assert a.events["bytes"].to_list() == b.events["bytes"].to_list()


def test_transfers_in_flight_are_not_top_kernels(loaded: dict[str, tracelens.Trace]) -> None:
    """A copy's span on an async lane is its start op's transfer, not a kernel of its own:
    remat's top kernels were five copy-starts (8.86 ms "in" copy-start.3, 4 ops of ~3 ns);
    every kernel's time is now its ops' time on the core's op line."""
    trace = loaded["remat"]
    s = tracelens.summarize(trace)
    ops = _ops(trace).group_by(pl.col("name").cast(pl.String)).agg(
        ns=(pl.col("end_ns") - pl.col("start_ns")).sum(), n=pl.len())
    ops = {r["name"]: (r["ns"], r["n"]) for r in ops.iter_rows(named=True)}
    kernels = s["top_kernels"]
    assert kernels and all(k["category"] == "gemm" for k in kernels[:10])
    for k in kernels:
        assert (k["sum_ns"], k["count"]) == ops[k["name"]], k["name"]


def test_an_eager_tpu_loop_equals_xprofs_op_profile(tmp_path: Path) -> None:
    """eager_block (one jitted module per jnp call, no step annotation): XProf's overview
    finds no steps in it, its op profile is ours; our steps are its heaviest program's runs."""
    trace = tracelens.load(_path("eager_block"))
    s = tracelens.summarize(trace)
    (d,) = s["devices"]
    _op_profile_equal("eager_block", trace, d, tmp_path)
    assert s["steps_source"].startswith("program:") and len(d["steps"]) == 3


# -- the commands ----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("report", "{remat}", "-o", "{tmp}/r.html"),
    ("critical-path", "{remat}"),
    ("hlo", "{flash}"),
    ("export", "{multi}", "-o", "{tmp}/e.csv"),
    ("compare", "{remat}", "{flash}"),
    ("report", "{eager_block}", "-o", "{tmp}/r.html"),
    ("critical-path", "{eager_block}"),
    ("hlo", "{eager_block}"),
    ("export", "{eager_block}", "-o", "{tmp}/e.csv"),
])
def test_commands_run_on_tpu_traces(args: tuple[str, ...], tmp_path: Path) -> None:
    names = {n: str(_path(n)) for n in (*TRACES, "eager_block")}
    argv = [a.format(tmp=tmp_path, **names) for a in args]
    res = CliRunner().invoke(main, argv, catch_exceptions=False)
    assert res.exit_code == 0, res.output


# -- a writer-made multi-chip TPU trace: async ICI collectives --------------------------------

def test_multichip_async_collectives_show_their_exposure_and_types(tmp_path: Path) -> None:
    """tracelens_dev's TPU writer plants per chip and step async all-gathers (their own
    start/done categories) and async-wrapped reduce-scatters hidden behind a matrix product
    and a loop fusion, then waited for in their done ops, and one synchronous all-reduce:
    every chip's communication in flight, exposed and overlapped time is what it planted."""
    from tracelens_dev.writers.xspace import TpuLayout, build_tpu_xspace

    layout = TpuLayout()
    p = tmp_path / "tpu4.xplane.pb"
    p.write_bytes(build_tpu_xspace(layout))
    trace = tracelens.load(p)
    s = tracelens.summarize(trace)
    assert [d["product"] for d in s["devices"]] == ["TPU v5 Lite"] * layout.chips
    for d in s["devices"]:
        truth = layout.truth(d["device"])
        t = d["timeline"]
        for key in ("compute_ns", "comm_ns", "exposed_comm_ns", "overlapped_comm_ns"):
            assert t[key] == layout.steps * truth[key], (d["device"], key)
        assert [st["timeline"]["span_ns"] for st in d["steps"]] != []
    by_type = {c["type"]: c for c in s["collectives"]["by_type"]}
    assert set(by_type) == {"all-gather", "reduce-scatter", "all-reduce"}
    n = layout.chips * layout.steps
    assert by_type["all-reduce"]["exposed_ns"] == n * layout.allreduce_ns
    waits = sum(layout.wait_ns(c) for c in range(layout.chips)) * layout.steps * layout.layers
    starts = n * layout.layers * layout.start_ns
    assert by_type["all-gather"]["exposed_ns"] == by_type["reduce-scatter"]["exposed_ns"] \
        == waits + starts
    rules = trace.events.group_by(op=pl.col("op").cast(pl.String).str.extract(r"^([a-z_-]+)"),
                                  rule=pl.col("rule").cast(pl.String)).agg().sort("op")
    assert dict(rules.iter_rows()) == {
        "add_fusion": "elementwise.tpu", "all-gather-done": "collective.tpu",
        "all-gather-start": "collective.tpu", "all-reduce": "collective.tpu",
        "convolution_fusion": "gemm.tpu_matmul", "reduce-scatter-done": "collective.tpu_async",
        "reduce-scatter-start": "collective.tpu_async"}
    # the chip with the longest waits is the last to arrive
    assert s["collectives"]["stragglers"][0]["device"] == layout.chips - 1


# -- across vendors ----------------------------------------------------------------------------

GPU_SAMPLE = TPU.parent / "mi300x_8gpu_llama_step.xplane.pb"


def test_compare_a_tpu_run_with_a_gpu_run_says_the_hardware_differs() -> None:
    res = CliRunner().invoke(main, ["compare", "--format", "json", str(GPU_SAMPLE),
                                    str(_path("remat"))], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # the warnings also go to stderr
    text = json.dumps(out)
    assert "different vendors' hardware" in text and "TPU v5 Lite" in text
    comps = {c["component"]: c for c in out["components"]}
    assert comps["compute:gemm"]["new_ns"] > comps["compute:gemm"]["base_ns"]


def test_history_keeps_tpu_and_gpu_series_apart(tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    series = []
    for path in (_path("remat"), GPU_SAMPLE):
        res = CliRunner().invoke(main, ["history", "add", "--store", str(store),
                                        "--tag", "model=llama", str(path)],
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.output
        series += re.findall(r"series (.+)", res.output)
    # one tag, two series: the hardware is part of a series' key
    assert len(series) == 2 and "TPU v5 Lite" in series[0] and "MI300X" in series[1]


@pytest.mark.parametrize("op, category, rule", [
    ("convolution_add_fusion.3", "convolution fusion", "gemm.tpu_matmul"),
    ("flash_mha_bwd_dq_block_q_major", "custom-call", "attention.tpu_kernel"),
    ("copy-done.48", "copy-done", "memory.tpu_copy"),
    ("select_reduce_fusion", "loop fusion", "reduction.tpu_loop_reduce"),
    ("compare_select_fusion", "loop fusion", "elementwise.tpu"),
    ("fusion.60", "loop fusion; root reduce", "reduction.tpu_loop_root"),
    ("fusion.61", "loop fusion; root multiply", "elementwise.tpu"),
    ("sort", "sort", "other.tpu"),
])
def test_explain_gives_the_tpu_rule(op: str, category: str, rule: str) -> None:
    res = CliRunner().invoke(main, ["explain", op, "--op", op, "--hlo-category", category],
                             catch_exceptions=False)
    assert res.exit_code == 0 and f"rule:        {rule}\n" in res.output, res.output


@pytest.mark.parametrize("name", ["flash", "multi"])
def test_both_decoders_read_tpu_planes_alike(name: str) -> None:
    """The C decoder and the per-event reader give the same TPU events, steps and devices."""
    from parsers.xspace import native, read

    if not native.available():
        pytest.skip("the C decoder is not built")
    c, py = read(_path(name), decoder="c"), read(_path(name), decoder="python")
    for frame in ("events", "steps", "devices"):
        a, b = getattr(c, frame), getattr(py, frame)
        assert a.cast({k: pl.String for k, v in a.schema.items() if v == pl.Categorical}) \
            .equals(b.cast({k: pl.String for k, v in b.schema.items()
                            if v == pl.Categorical})), frame
    assert c.meta.warnings == py.meta.warnings


def test_scaling_from_a_tpu_run_to_a_gpu_run_says_the_hardware_differs() -> None:
    res = CliRunner().invoke(main, ["scaling", "--format", "json", str(_path("remat")),
                                    str(GPU_SAMPLE)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "different vendors' hardware (base: 1\\u00d7 TPU v5 Lite" in res.output or \
        "different vendors' hardware (base: 1× TPU v5 Lite" in res.output


def test_the_critical_path_of_a_tpu_step_is_its_ops_not_transfers_in_flight() -> None:
    """The async copies' spans (in flight beside the ops, on lanes of their own) put 73% of
    the remat step's path in memory while its ops ran 100% of the time and XProf puts 89% of
    op time in convolution fusions: the core waits for a transfer only at its done op, so the
    path holds the ops, and one step's memory on it is at most the device's exclusive memory
    time over the whole trace (1.5 ms; memory summed over the spans in flight: 129 ms)."""
    from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
    from tracelens.engine.protocol import run_trace

    t = tracelens.load(_path("remat"))
    r = run_trace(CriticalPath(), t, CriticalPathOptions())
    (p,) = r.paths
    comp = {c.component: c.ns for c in p.composition}
    assert comp["gemm"] >= 0.8 * p.length_ns, comp
    dev = tracelens.summarize(t)["devices"][0]
    exclusive = {c["category"]: c["exclusive_ns"] for c in dev["categories"]}
    assert comp.get("memory", 0) <= exclusive["memory"], (comp, exclusive)


# -- the compiled HLO of the TPU programs ------------------------------------------------------

def test_hlo_joins_the_tpu_programs_by_their_uint64_ids(loaded: dict[str, tracelens.Trace]
                                                        ) -> None:
    """The ops' ``program_id`` stats and ``/host:metadata``'s modules carry the same uint64
    fingerprints (``jit_adam(12830982495678525054)`` on multi: above 2^63-1); both are
    stored as the same 64 bits, so every op joins its program's HLO and ``hlo`` lists both
    programs as run, under the trace's own numbers."""
    trace = loaded["multi"]
    assert trace.events["program_id"].null_count() == 0
    assert set(trace.events["program_id"]) == set(trace.modules["program_id"])
    res = CliRunner().invoke(main, ["hlo", "--format", "json", str(_path("multi"))],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    progs = {p["module"]: p for p in json.loads(res.stdout)["programs"]}
    assert {m: (p["program_id"], p["executed"]) for m, p in progs.items()} == {
        "jit_adam": (12830982495678525054, True), "jit_loss_fn": (8922086851000103833, True)}
    res = CliRunner().invoke(main, ["hlo", "--format", "json", "--program",
                                    "12830982495678525054", str(_path("multi"))],
                             catch_exceptions=False)
    assert [p["module"] for p in json.loads(res.stdout)["programs"]] == ["jit_adam"]
    # the ops' cost stays XLA's own (what XProf sums); the HLO only adds what the trace lacks
    ops = _ops(trace)
    assert (ops["cost_source"].cast(pl.String) == "trace").all()
    assert ops.filter(pl.col("category") == "gemm")["dtype_source"].cast(pl.String) \
        .is_in(["trace"]).all()


def test_a_tpu_plane_without_peaks_keeps_its_name_and_gets_the_tables_peaks(tmp_path: Path
                                                                            ) -> None:
    """A plane that names its chip but gives no peak stats: the device keeps the trace's name
    and MFU uses the hardware table's entry for that chip (v5e: 197 bf16 TFLOP/s)."""
    from tracelens_dev.writers.xspace import Activity, InlineStr, build_xspace

    acts = [Activity(0, 1, f"%convolution_fusion.{i} = bf16[8]{{0}} fusion(bf16[8]{{0}} %p)",
                     i * 100, 50, md_stats={"flops": 1e6, "hlo_category": InlineStr(
                         "convolution fusion")}, display_name=f"convolution_fusion.{i}",
                     line_name="XLA Ops") for i in range(4)]
    p = tmp_path / "tpu.xplane.pb"
    p.write_bytes(build_xspace(acts, device_plane="/device:TPU:", device_stats={
        0: {"device_type_string": "TPU v5 Lite"}}))
    (d,) = tracelens.summarize(tracelens.load(p))["devices"]
    assert d["product"] == "TPU v5 Lite"
    assert d["spec"]["peak_tflops"]["bf16"] == 197


def test_per_device_labels_say_tpu(tmp_path: Path) -> None:
    """The critical path's device labels (and its wait components) say what kind of device
    the model's devices are: ``TPU<n>`` on TPU planes (vendor google), not ``GPU<n>``."""
    from tracelens_dev.writers.xspace import TpuLayout, build_tpu_xspace

    res = CliRunner().invoke(main, ["critical-path", str(_path("remat"))],
                             catch_exceptions=False)
    assert res.exit_code == 0 and "runsc/TPU0" in res.output and "GPU" not in res.output
    p = tmp_path / "tpu4.xplane.pb"
    p.write_bytes(build_tpu_xspace(TpuLayout()))
    res = CliRunner().invoke(main, ["critical-path", "--format", "json", str(p)],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    waits = {c["component"] for d in out["paths"] for c in d["composition"]
             if c["component"].startswith("wait:")}
    assert waits and all(re.fullmatch(r"wait:.+/TPU\d+", w) for w in waits), waits


def test_a_step_of_two_programs_is_one_step(loaded: dict[str, tracelens.Trace]) -> None:
    """multi runs two jitted programs per host step; its Steps line has one event per program
    run (8). They are grouped into the host's 4 annotated steps, each the grads run then the
    update run (XProf: 4 steps of 12.37-12.38 ms), and a warning says so; a trace of one
    program per step (remat) keeps its Steps events as they are."""
    trace = loaded["multi"]
    assert trace.steps["step"].to_list() == [0, 1, 2, 3]
    dur = (trace.steps["end_ns"] - trace.steps["start_ns"]).to_list()
    assert all(12_300_000 < x < 12_450_000 for x in dur), dur
    (note,) = [w for w in trace.meta.warnings if "grouped into the host's" in w]
    assert "8 device steps" in note and "jit_loss_fn, jit_adam" in note and "2 runs" in note
    assert not [w for w in loaded["remat"].meta.warnings if "grouped" in w]


def test_loop_fusions_are_reductions_by_their_root_in_the_hlo(
        loaded: dict[str, tracelens.Trace]) -> None:
    """A loop fusion is a reduction when its root is a reduce, which the trace's HLO says
    where the name does not (remat: fusion.60, fusion.185, ... are rooted at a reduce; only
    select_reduce_fusion's name says so); every other loop fusion stays elementwise."""
    from tracelens.hlo.index import HloIndex

    trace = loaded["remat"]
    ops = trace.events.filter(pl.col("hlo_category") == "loop fusion").select(
        "host", "program_id", "op", "category", "rule").unique()
    index = HloIndex.from_frames(trace.modules, wanted=ops)
    roots = [index.fusion_root(h, p, str(o)) for h, p, o in ops.select(
        "host", "program_id", "op").iter_rows()]
    assert None not in roots
    cats = ops.with_columns(root=pl.Series(roots))
    by_root = cats.filter(pl.col("root").is_in(["reduce", "reduce-window"]))
    assert by_root.height == 8 and (by_root["category"] == "reduction").all()
    named = ~by_root["op"].cast(pl.String).str.contains("reduce")
    assert named.sum() == 6
    assert set(by_root.filter(named)["rule"].cast(pl.String)) == {"reduction.tpu_loop_root"}
    assert (cats.filter(~pl.col("root").is_in(["reduce", "reduce-window"]))["category"]
            == "elementwise").all()


def test_async_spans_take_as_few_lanes_as_are_in_flight() -> None:
    """The columnar lane assignment: no two spans of a lane overlap (a lane freed at t takes
    a span starting at t; zero-length spans too), and there are as many lanes as the most
    spans in flight at once, on random spans of every overlap."""
    import numpy as np

    from parsers.xspace.tpu import lane_numbers

    rng = np.random.default_rng(48)
    for n in [0, 1, 2, 5, *rng.integers(10, 400, 60)]:
        start = np.sort(rng.integers(0, 1000, n))
        end = start + rng.integers(0, 120, n) * rng.integers(0, 2, n)  # many zero-length
        o = np.lexsort((end, start))
        start, end = start[o], end[o]
        lane = lane_numbers(start, end)
        k = np.lexsort((start, lane))
        same = lane[k][1:] == lane[k][:-1]
        assert (start[k][1:][same] >= end[k][:-1][same]).all()
        # in flight at each span's start: the spans of positive length covering it (half
        # open); a zero-length span for its instant, before the spans that start then
        pos = end > start
        began = np.where(pos[:, None], start[None, pos] <= start[:, None],
                         start[None, pos] < start[:, None])
        cover = (began & (start[:, None] < end[None, pos])).sum(axis=1) + ~pos
        assert (lane.max() + 1 if n else 0) == (int(cover.max()) if n else 0), n


def test_scaling_names_tpu_devices_as_tpus(tmp_path: Path) -> None:
    """scaling's per-device labels (and its straggler verdicts) name a TPU run's devices
    ``<host>/TPU<n>`` from the model's devices, not ``GPU<n>``."""
    from tracelens.analyze.runs.scaling import device_kind_of, profile
    from tracelens_dev.writers.xspace import TpuLayout, build_tpu_xspace

    p = tmp_path / "tpu4.xplane.pb"
    p.write_bytes(build_tpu_xspace(TpuLayout()))
    prof = profile(tracelens.load(p), str(p))
    assert device_kind_of(prof.hardware) == "TPU"
    assert prof.per_device and all(re.fullmatch(r".+/TPU\d", k) for k in prof.per_device)
