"""The XSpace writer: bulk-encoded lines decode exactly, a written Trace reads back as itself,
multi-host log directories, the scale knob, and XProf's own converter accepting the files."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracelens
from tracelens_dev.writers.xspace_encode import Column, encode_events, varint, varint_matrix
from parsers.xplane_schema import xspace_class
from parsers.xspace import load_xspace
from tracelens_dev.writers.xspace import write
from tests.conftest import GPU_TRACES, SAMPLES, kernel_stats_by_name, real_trace
from tests.synth_helpers import synthetic, write_and_load
from tracelens_dev.synth import Scenario, Straggler, build, events_per_device_per_step, scaled
from tracelens_dev.synth.samples import SAMPLES as SAMPLE_DEFS

IDENTITY = ["host", "rank", "device", "stream", "kind", "name", "start_ns", "end_ns", "op",
            "module", "program_id", "correlation_id"]
I64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(I64, min_size=1, max_size=40))
def test_varint_matrix_is_protobuf_varint(values: list[int]) -> None:
    mat, lens = varint_matrix(np.array(values, dtype=np.int64))
    for row, n, v in zip(mat, lens, values):
        assert bytes(row[:n]) == varint(v)
    stat = xspace_class()().planes.add().stats.add()
    for v in values:  # and varint() is what protobuf writes for an int64 field
        stat.int64_value = v
        assert stat.SerializeToString() == b"\x20" + varint(v)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_bulk_events_equal_protobuf_serialization(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 30))
    ints = st.lists(st.integers(0, 2**62), min_size=n, max_size=n)
    md, off, dur = (np.array(data.draw(ints), np.int64) for _ in range(3))
    cols = []
    for sid, field_no in ((1, 3), (2, 4), (300, 7)):
        vals = np.array(data.draw(st.lists(I64 if field_no == 4 else st.integers(0, 2**63 - 1),
                                           min_size=n, max_size=n)), np.int64)
        present = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        cols.append(Column(sid, field_no, vals, present))
    line = xspace_class()().planes.add().lines.add()
    for i in range(n):
        ev = line.events.add()
        ev.metadata_id, ev.offset_ps, ev.duration_ps = int(md[i]), int(off[i]), int(dur[i])
        for c in cols:
            if c.present[i]:
                s = ev.stats.add()
                s.metadata_id = c.metadata_id
                name = {3: "uint64_value", 4: "int64_value", 7: "ref_value"}[c.value_field]
                setattr(s, name, int(c.values[i]) & (2**64 - 1) if c.value_field != 4
                        else int(c.values[i]))
    # Same message (proto3 may leave zero-valued plain fields out; the bulk encoder writes
    # every field, which parsers read identically).
    decoded = type(line)()
    decoded.ParseFromString(encode_events(md, off, dur, cols))
    assert decoded == line
    if (md != 0).all() and (dur != 0).all():
        assert encode_events(md, off, dur, cols) == line.SerializeToString()


def _normalized(df: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    return df.select(cols).sort(cols, nulls_last=True)


@pytest.mark.parametrize("sc", [
    Scenario(device="mi355x", gpus=3, steps=2, layers=2, seed=1),
    Scenario(device="h100", gpus=2, steps=2, layers=1, moe=True, fsdp=False, seed=2),
    Scenario(device="mi300x", hosts=3, gpus=2, steps=1, layers=1, host_offsets_ns=(0, 9, 4_321),
             straggler=Straggler(2, 1, 1.5), seed=3),
], ids=["mi355x", "h100", "mi300x-3hosts"])
def test_written_trace_reads_back_as_itself(sc: Scenario, tmp_path: Path) -> None:
    syn = build(sc)
    trace, files = write_and_load(syn, tmp_path)
    src = syn.trace
    assert len(files) == sc.hosts
    assert _normalized(trace.events, IDENTITY).equals(_normalized(src.events, IDENTITY))
    # What the format states: memcpy direction and size, the collective type (via the op).
    keyed = ["correlation_id", "rank", "subcategory", "bytes"]
    mine = src.events.filter(pl.col("subcategory").is_not_null())
    theirs = trace.events.join(mine.select("rank", "correlation_id"),
                               on=["rank", "correlation_id"])
    assert _normalized(theirs, keyed).equals(_normalized(mine, keyed))
    host_cols = ["host", "rank", "pid", "tid", "name", "start_ns", "end_ns", "correlation_id",
                 "kind"]
    assert _normalized(trace.host_events, host_cols).equals(
        _normalized(src.host_events, host_cols))
    assert trace.steps.sort("rank", "step").equals(src.steps.sort("rank", "step"))
    assert trace.devices.sort("rank", "device").equals(src.devices.sort("rank", "device"))
    assert trace.modules.sort("rank").equals(src.modules.sort("rank"))
    if sc.hosts > 1:
        assert trace.meta.alignment.startswith("wall-clock")
        run = files[0].parent
        assert run.parent.name == "profile" and run.parent.parent.name == "plugins"
        starts = {}
        for f in files:
            env = next(p for p in load_xspace(f).planes if p.name == "Task Environment")
            starts[f.name.split(".")[0]] = env.stats[0].uint64_value
        assert starts == {h: v.profile_start_ns for h, v in src.meta.hosts.items()}


def test_plane_and_line_names_follow_the_device_model(tmp_path: Path) -> None:
    names = {}
    for dev in ("mi300x", "mi355x", "h100"):
        syn = synthetic(device=dev, gpus=1, steps=1, layers=1)
        f = write(syn.trace, tmp_path / f"{dev}.xplane.pb")[0]
        space = load_xspace(f)
        gpu = next(p for p in space.planes if p.name == "/device:GPU:0")
        refs = {k: v.name for k, v in gpu.stat_metadata.items()}
        stats = {refs[s.metadata_id]: getattr(s, s.WhichOneof("value")) for s in gpu.stats}
        names[dev] = (sorted(line.name for line in gpu.lines), stats)
        meta = next(p for p in space.planes if p.name == "/host:metadata")
        assert [m.name for m in meta.event_metadata.values()] == ["jit_train_step(17)"]
        first = gpu.lines[0].events[0]
        ev_stats = {refs[s.metadata_id] for s in first.stats}
        assert {"correlation_id", "hlo_op", "hlo_module", "program_id"} <= ev_stats
    assert names["mi300x"][0] == ["Stream #16(Kernel)", "Stream #17(Kernel)",
                                  "Stream #19(Kernel)"]
    assert names["mi355x"][0] == ["Stream #2", "Stream #3", "Stream #4"]
    assert names["h100"][0] == ["Stream #14(MemcpyH2D,MemcpyD2D)", "Stream #20(Kernel)",
                                "Stream #7(Kernel)"]
    assert names["h100"][1]["gpu_device_name"] == "NVIDIA H100 80GB HBM3"
    assert names["h100"][1]["device_vendor"] == "Nvidia"
    assert names["mi355x"][1]["gpu_device_name"] == "gfx950"
    assert names["mi300x"][1]["memory_bandwidth"] == 2_662_400_000_000


def test_real_trace_rewrites_to_the_same_events(tmp_path: Path) -> None:
    """write() takes any Trace, not only synthetic ones: a real MI300X trace round-trips."""
    trace = tracelens.load(real_trace(GPU_TRACES["conv08"]))
    f = write(trace, tmp_path / "again.xplane.pb")[0]
    again = tracelens.load(f)
    cols = [*IDENTITY, "category", "subcategory", "rule"]
    assert _normalized(again.events, cols).equals(_normalized(trace.events, cols))
    assert again.devices.drop("host").equals(trace.devices.drop("host"))
    assert tracelens.summarize(again)["devices"] == tracelens.summarize(trace)["devices"]


def test_scale_knob(tmp_path: Path) -> None:
    sc = scaled(Scenario(gpus=2, layers=2), events_per_device=3_000)
    per_step = events_per_device_per_step(sc)
    assert sc.steps == -(-3_000 // per_step) and not sc.host_launches
    syn = build(sc, truth=False)
    assert syn.truth is None
    counts = syn.trace.events.group_by("device").len()["len"].to_list()
    assert counts == [sc.steps * per_step] * 2 and min(counts) >= 3_000
    f = write(syn.trace, tmp_path / "big.xplane.pb.gz")[0]
    assert f.read_bytes()[:2] == b"\x1f\x8b"
    assert tracelens.load(f).events.height == 2 * sc.steps * per_step


# -- XProf's own converter (the reference tool) --------------------------------------------------

def _xprof(paths: list[Path], tool: str, tmp: Path) -> object:
    """Run an XProf converter on copies (it writes cache files next to its input)."""
    from xprof.convert import raw_to_tool_data

    copies = []
    for p in paths:
        dst = tmp / f"{len(copies)}" / p.name
        dst.parent.mkdir(parents=True)
        shutil.copy(p, dst)
        copies.append(str(dst))
    data, _ = raw_to_tool_data.xspace_to_tool_data(copies, tool, {})
    assert data is not None, tool
    return json.loads(data)


def _kernel_stats(paths: list[Path], tmp: Path) -> dict[str, tuple[int, float]]:
    return kernel_stats_by_name(_xprof(paths, "kernel_stats", tmp))


def _trace_viewer_counts(path: Path, tmp: Path) -> dict[tuple[int, int], int]:
    """Device activities per (GPU ordinal, stream) in XProf's trace viewer."""
    events = _xprof([path], "trace_viewer", tmp)["traceEvents"]
    proc = {e["pid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e["name"] == "process_name"}
    thread = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
              if e.get("ph") == "M" and e["name"] == "thread_name"}
    out: dict[tuple[int, int], int] = defaultdict(int)
    for e in events:
        p, t = proc.get(e.get("pid"), ""), thread.get((e.get("pid"), e.get("tid")), "")
        if e.get("ph") == "X" and p.startswith("/device:GPU:") and t.startswith("Stream #"):
            out[(int(p.rsplit(":", 1)[1]), int(t[8:].split("(")[0]))] += 1
    return dict(out)


def _check_xprof(trace: tracelens.Trace, files: list[Path], tmp: Path) -> None:
    kernels = trace.events.filter(pl.col("kind") == "kernel")
    ours = {n: (c, s / 1000.0) for n, c, s in kernels.group_by("name").agg(
        pl.len(), (pl.col("end_ns") - pl.col("start_ns")).sum()).iter_rows()}
    theirs = _kernel_stats(files, tmp / "ks")
    assert set(theirs) == set(ours)
    for name, (count, us) in theirs.items():
        assert ours[name][0] == count, name
        assert ours[name][1] == pytest.approx(us, rel=1e-6), name
    hosts = trace.devices.select("host", "rank").unique().sort("rank")["host"].to_list()
    for i, f in enumerate(files):
        rank = hosts.index(f.name.split(".")[0]) if len(files) > 1 else 0
        per_stream = {(d, s): n for d, s, n in trace.events.filter(pl.col("rank") == rank)
                      .group_by("device", "stream").len().iter_rows()}
        assert _trace_viewer_counts(f, tmp / f"tv{i}") == per_stream


@pytest.mark.parametrize("name", [s.name for s in SAMPLE_DEFS])
def test_xprof_accepts_committed_samples(name: str, tmp_path: Path) -> None:
    sample = next(s for s in SAMPLE_DEFS if s.name == name)
    path = SAMPLES / sample.trace_path
    files = [path] if path.is_file() else sorted(path.rglob("*.xplane.pb"))
    _check_xprof(tracelens.load(path), files, tmp_path)


@pytest.mark.parametrize("device", ["mi300x", "mi355x", "h100"])
def test_xprof_accepts_generated_files(device: str, tmp_path: Path) -> None:
    syn = synthetic(device=device, hosts=2, gpus=2, steps=1, layers=1, moe=True, seed=9)
    trace, files = write_and_load(syn, tmp_path)
    _check_xprof(trace, files, tmp_path)
    overview = _xprof(files[:1], "overview_page", tmp_path / "ov")
    assert overview  # the step/overview pipeline runs on the generated files


_HLO_STATS = """
import json, sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data(sys.argv[1:], "hlo_stats", {})
print(data.decode() if isinstance(data, bytes) else data)
"""


def _xprof_hlo_stats(path: Path, tmp: Path) -> dict[str, tuple[float, float, str]]:
    """Per HLO op: FLOPs and bytes per occurrence (from XProf's rates) and its category. Run
    in a child process: an HloProto XProf's XLA cannot take aborts the process (a CHECK)."""
    import subprocess
    import sys

    dst = tmp / path.name
    shutil.copy(path, dst)  # XProf writes cache files next to its input
    run = subprocess.run([sys.executable, "-c", _HLO_STATS, str(dst)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "HloCostAnalysis" not in run.stderr and "Failed to" not in run.stderr, \
        run.stderr[-2000:]
    table = json.loads(run.stdout)
    cols = [c["id"] for c in table["cols"]]
    out = {}
    for row in table["rows"]:
        r = dict(zip(cols, (c["v"] if c else None for c in row["c"])))
        t_s, n = r["total_time"] * 1e-6, r["occurrences"]
        out[r["hlo_op_name"]] = (r["model_flop_rate"] * 1e9 * t_s / n,  # GFLOP/s
                                 r["measured_memory_bw"] * 2**30 * t_s / n,  # GiB/s
                                 r["category"])
    return out


@pytest.mark.parametrize("name", ["h100_8gpu_moe_ddp", "mi300x_8gpu_llama_step"])
def test_xprof_hlo_stats_reads_the_sample_hlo(name: str, tmp_path: Path) -> None:
    """XProf decodes the program's HLO and lists every op; where its cost model counts what
    ours counts, it agrees with the construction's truth:

    - bytes of every fusion, copy, sort and Triton GEMM (operands + result; the loss fusion
      excepted: XProf leaves its f32[] output out, 4 bytes);
    - cuBLASLt GEMMs (``__cublas$lt$matmul``, H100 forward): FLOPs and bytes exactly, batched
      expert GEMMs included;
    - Triton GEMM fusions: the dot's 2·M·N·K, plus XProf's 3 FLOPs per element of the
      fusion's output convert;
    - ``__cublas$gemm`` (hipBLASLt and cuBLAS) and attention custom calls: XProf reports
      nothing (0), as on the real traces (docs/cost-model.md §10).
    """
    import re

    sample = next(s for s in SAMPLE_DEFS if s.name == name)
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    stats = _xprof_hlo_stats(SAMPLES / sample.trace_path, tmp_path)
    ops = {o["op"]: o for o in truth["ops"]}
    assert set(stats) == set(ops)
    approx = {"rel": 1e-6}
    seen = set()
    for op, o in ops.items():
        flops, nbytes, _ = stats[op]
        if o["kind"] in ("fusion", "copy", "sort", "triton-gemm") and \
                not o["what"].startswith("fusion kInput: (f32[]"):
            assert nbytes == pytest.approx(o["bytes"], **approx), op
        if o["kind"] == "triton-gemm":
            m, n = (int(x) for x in re.search(r"M=(\d+) N=(\d+)", o["what"]).groups())
            assert flops - 3 * m * n == pytest.approx(o["flops"], **approx), op
        elif o["kind"] == "gemm" and "__cublas$lt$matmul" in o["what"]:
            assert (flops, nbytes) == (pytest.approx(o["flops"], **approx),
                                       pytest.approx(o["bytes"], **approx)), op
        elif o["kind"] in ("gemm", "attention"):
            assert (flops, nbytes) == (0, 0), op
        seen.add(o["kind"] + ("-lt" if "$lt$" in o["what"] else ""))
    assert {"fusion", "triton-gemm", "gemm", "attention", "collective"} <= seen
    assert ("gemm-lt" in seen) == name.startswith("h100")
