"""``tracelens memory`` (docs/memory.md): the allocator events of XSpace and Kineto traces,
each allocator's peak in use, when, and what is live at it.

Truth: the real TPU v5e traces of ``sample_traces/tpu/memory`` (made by
``make_memory_traces.py``) equal XProf's own ``memory_profile`` figures written beside them
(``xprof_memory_profile.json``, by ``xprof_figures.py``; re-run here where XProf is installed),
and a Kineto trace from our writer with ``[memory]`` events reads exactly as computed by hand.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tests.conftest import cli
from tests.synth_helpers import writer_device, writer_events
from tracelens.api.analysis import TraceAnalysis
from tracelens.results.memory import DeviceMemory
from tracelens_dev.writers.kineto import write as write_kineto
from tracelens_dev.writers.kineto_memory import MemoryEvent, add_memory

ROOT = Path(__file__).resolve().parents[1]
MEM = ROOT / "sample_traces" / "tpu" / "memory"
VARIANTS = ("plain", "remat", "bigbatch", "offload")
FIGURES = json.loads((MEM / "xprof_memory_profile.json").read_text())
ALL = 10**6  # list every group of live allocations


@functools.cache
def _device(variant: str) -> DeviceMemory:
    res = TraceAnalysis(MEM / f"{variant}.xplane.pb.gz").memory_report(top=ALL)
    (dev,) = res.devices  # one TPU core, one allocator
    return dev


@pytest.mark.parametrize("variant", VARIANTS)
def test_tpu_peak_equals_xprof(variant: str) -> None:
    """Peak in use, its heap and stack parts, capacity and the time of the peak: XProf's."""
    from parsers.xspace.memory import read_memory

    x = FIGURES[variant]["0"]
    d = _device(variant)
    assert (d.allocator, d.device) == ("0", 0)
    assert d.peak_bytes == x["peak_bytes_in_use"]
    assert (d.heap_bytes, d.stack_bytes) == (x["heap_bytes"], x["stack_bytes"])
    assert d.capacity_bytes == x["capacity_bytes"] and d.capacity_source == "allocator"
    assert d.lifetime_peak_bytes == x["lifetime_peak_bytes"]
    # XProf's time is the event's offset in its line; ours the line's start plus it
    mem = read_memory(MEM / f"{variant}.xplane.pb.gz")
    at = mem.filter((pl.col("time_ns") == d.peak_time_ns) & (pl.col("in_use") == d.peak_bytes))
    assert x["peak_time_ps"] in at["offset_ps"].to_list()


@pytest.mark.parametrize("variant", VARIANTS)
def test_tpu_live_at_peak_equals_xprof(variant: str) -> None:
    """XProf lists the allocations of the peak's step live at the peak and calls the rest of
    the heap "unused preallocated device memory"; we list every allocation of the profile
    live at the peak. So each of XProf's groups is among ours with at least its count, and
    both split the same heap: XProf's listed + its remainder = ours + our remainder."""
    x = FIGURES[variant]["0"]
    d = _device(variant)
    ours = Counter({(a.allocation_bytes, a.requested_bytes, a.op or "", a.shape or "",
                     a.region or ""): a.count for a in d.live})
    theirs = Counter({(a["allocation_bytes"], a["requested_bytes"], a["op"], a["shape"],
                       a["region"]): a["count"] for a in x["live"]})
    assert theirs and not theirs - ours
    listed = sum(a["allocation_bytes"] * a["count"] for a in x["live"])
    unused = sum(a["allocation_bytes"] for a in x["special"]
                 if a["op"] == "unused preallocated device memory")
    assert listed + unused == x["heap_bytes"] == d.live_bytes + d.unattributed_bytes
    assert d.live_bytes >= listed and 0 <= d.unattributed_bytes <= unused
    assert d.live_count == sum(a.count for a in d.live)


def test_remat_and_batch_move_the_peak() -> None:
    """Remat keeps only the layers' inputs for the backward pass: its peak is below the
    plain run's by what the two traces say; the larger batch fills 99% of the chip."""
    plain, remat, big = (_device(v) for v in ("plain", "remat", "bigbatch"))
    assert remat.peak_bytes == 1_491_168_768 and plain.peak_bytes == 6_983_468_032
    assert big.peak_pct_of_capacity is not None and big.peak_pct_of_capacity > 99
    # the plain run's largest live groups are the attention scores (f32 [8,8,512,512]) kept
    # for the backward; remat keeps none of them
    assert any("f32[8,8,512,512]" in (a.shape or "") for a in plain.live)
    assert not any("[8,8,512,512]" in (a.shape or "") for a in remat.live)


def _xprof_figures():  # noqa: ANN202 (a module loaded from its file)
    pytest.importorskip("xprof", reason="XProf (the reference converter) is not installed")
    import importlib.util

    spec = importlib.util.spec_from_file_location("xprof_figures", MEM / "xprof_figures.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_offloaded_state_is_not_in_the_allocator_events() -> None:
    """offload keeps its f32 optimizer state in pinned host memory: the TPU runtime records
    no allocator for it (the device's alone), so the trace says nothing of host memory; the
    device's peak, XProf's, is above the plain run's (the state visits it for the update)."""
    res = TraceAnalysis(MEM / "offload.xplane.pb.gz").memory_report()
    assert [d.allocator for d in res.devices] == ["0"]
    assert res.devices[0].peak_bytes == FIGURES["offload"]["0"]["peak_bytes_in_use"] \
        == 7_355_596_800 > _device("plain").peak_bytes


def test_xprof_converter_gives_the_written_figures() -> None:
    """The figures beside the traces are XProf's: its converter, run here, gives them."""
    mod = _xprof_figures()
    for v in VARIANTS:
        assert mod.figures(mod.memory_profile(MEM / f"{v}.xplane.pb.gz")) == FIGURES[v]


SHARED = ROOT.parent / "shared" / "traces" / "xprof"


@pytest.mark.parametrize("path", [
    *(SHARED / f"mi300x_jax08_{n}.xplane.pb" for n in ("gemm", "attention", "conv_8gpu")),
    *(ROOT / "sample_traces" / "tpu" / f"{n}.xplane.pb"
      for n in ("remat", "flash", "sync", "multi", "eager_block"))],
    ids=lambda p: p.name.split(".")[0])
def test_xspace_equals_xprof(path: Path) -> None:
    """Real JAX 0.8 traces on an MI300X (GPU BFC allocators, device and host) and the other
    real TPU v5e traces (their few allocations: the losses, the eager block's buffers): every
    allocator's peak, capacity and time of the peak are XProf's, and what XProf lists live
    at the peak is among ours."""
    if not path.exists():
        pytest.skip("the shared real traces are not beside the checkout")
    from parsers.xspace.memory import read_memory

    mod = _xprof_figures()
    theirs = mod.figures(mod.memory_profile(path))
    res = TraceAnalysis(path).memory_report(top=ALL)
    ours = {d.allocator: d for d in res.devices}
    assert set(ours) == set(theirs) and ours
    mem = read_memory(path)
    for alloc, x in theirs.items():
        d = ours[alloc]
        assert (d.peak_bytes, d.capacity_bytes, d.lifetime_peak_bytes) == (
            x["peak_bytes_in_use"], x["capacity_bytes"], x["lifetime_peak_bytes"])
        at = mem.filter((pl.col("allocator") == alloc) & (pl.col("time_ns") == d.peak_time_ns)
                        & (pl.col("in_use") == d.peak_bytes))
        assert x["peak_time_ps"] in at["offset_ps"].to_list()
        got = Counter({(a.allocation_bytes, a.requested_bytes, a.op or "", a.shape or ""):
                       a.count for a in d.live})
        want = Counter({(a["allocation_bytes"], a["requested_bytes"], a["op"], a["shape"]):
                        a["count"] for a in x["live"]})
        for (size, requested, _, _), n in (want - got).items():
            # XProf orders events by their offset in their own line, whatever the line's
            # start: a free on a later-starting line can sort before its allocation
            assert n == 1 and _freed_before_peak_out_of_offset_order(
                mem.filter(pl.col("allocator") == alloc), size, requested, d.peak_time_ns)


def _freed_before_peak_out_of_offset_order(mem: pl.DataFrame, size: int, requested: int,
                                           peak_ns: int) -> bool:
    """Whether an allocation of that size was freed before the peak on the trace's clock by
    a free whose line offset is smaller than the allocation's (XProf: freed first)."""
    allocs = mem.filter((pl.col("kind") == "alloc") & (pl.col("allocation_bytes") == size)
                        & (pl.col("requested_bytes") == requested))
    frees = mem.filter(pl.col("kind") == "free")
    for a in allocs.iter_rows(named=True):
        f = frees.filter((pl.col("address") == a["address"]) & (pl.col("time_ns") > a["time_ns"])
                         ).sort("time_ns").head(1)
        if f.height and f["time_ns"][0] <= peak_ns and f["offset_ps"][0] < a["offset_ps"]:
            return True
    return False


# -- Kineto [memory] events from our writer, the timeline computed by hand -----------------

US = 1000
PRE = 64  # bytes allocated before the profile: in every total, in no event


def _kineto_job(tmp: Path) -> Path:
    """One MI300X, 2 steps of 10 µs (ProfilerStep annotations), and on cuda:0:
    A 100 B at 1 µs (aten::empty), B 300 B at 2 µs (aten::mm), free A at 3 µs, C 500 B at
    A's address at 4 µs (aten::add), free B at 5 µs, D 300 B at 6 µs (aten::cat: in use
    800 again, the peak's last event), free C at 12 µs, free D at 13 µs; one CPU allocation."""
    ev = writer_events([("kernel", "k", k * 10 * US, k * 10 * US + 5 * US, "aten::mm")
                        for k in range(2)])
    devices = pl.DataFrame([writer_device("amd", "gfx942", "AMD Instinct MI300X", 304,
                                          192 * 2**30)])
    steps = pl.DataFrame({"rank": [0, 0], "step": [0, 1], "start_ns": [0, 10 * US],
                          "end_ns": [10 * US, 20 * US], "source": ["annotation:gpu"] * 2})
    (path,) = write_kineto(tracelens.Trace(events=ev, host_events=pl.DataFrame(),
                                           steps=steps, devices=devices), tmp / "job")
    r = 4096  # reserved
    add_memory(path, [
        MemoryEvent(1 * US, 0x1000, 100, PRE + 100, r),
        MemoryEvent(2 * US, 0x2000, 300, PRE + 400, r),
        MemoryEvent(3 * US, 0x1000, -100, PRE + 300, r),
        MemoryEvent(4 * US, 0x1000, 500, PRE + 800, r),
        MemoryEvent(5 * US, 0x2000, -300, PRE + 500, r),
        MemoryEvent(6 * US, 0x3000, 300, PRE + 800, r),
        MemoryEvent(7 * US, 0x9000, 8, 8, 0, device_type=0),
        MemoryEvent(12 * US, 0x1000, -500, PRE + 300, r),
        MemoryEvent(13 * US, 0x3000, -300, PRE, r),
    ], ops=(("aten::empty", 900, 1100), ("aten::mm", 1900, 2500),
            ("aten::add", 3900, 4100), ("aten::cat", 5900, 6100)))
    return path


def test_kineto_memory_timeline_by_hand(tmp_path: Path) -> None:
    res = TraceAnalysis(_kineto_job(tmp_path)).memory_report()
    cpu, gpu = res.devices
    assert (cpu.allocator, cpu.device, cpu.peak_bytes, cpu.capacity_bytes) == ("cpu", None, 8,
                                                                               None)
    assert cpu.capacity_note == "host memory: its size is not in the trace"
    assert (gpu.allocator, gpu.device, gpu.events) == ("cuda:0", 0, 8)
    # 800 + PRE twice (4 µs and 6 µs): the peak is the last of them, in step 0
    assert (gpu.peak_bytes, gpu.peak_time_ns, gpu.peak_step) == (PRE + 800, 6 * US, 0)
    assert gpu.peak_op == "aten::cat"
    assert (gpu.capacity_bytes, gpu.capacity_source) == (192 * 2**30, "device properties")
    assert (gpu.heap_bytes, gpu.reserved_bytes, gpu.cached_free_bytes) == (
        PRE + 800, 4096, 4096 - PRE - 800)
    assert gpu.stack_bytes is None and gpu.fragmentation is None
    # live at the peak: C (500, aten::add) and D (300, aten::cat); PRE before the profile
    assert [(a.allocation_bytes, a.count, a.op, a.first_time_ns) for a in gpu.live] == [
        (500, 1, "aten::add", 4 * US), (300, 1, "aten::cat", 6 * US)]
    assert (gpu.live_count, gpu.live_bytes, gpu.unattributed_bytes) == (2, 800, PRE)
    assert [(s.step, s.peak_bytes, s.time_ns) for s in gpu.steps] == [
        (0, PRE + 800, 4 * US), (1, PRE + 300, 12 * US)]


def test_events_without_totals_say_so() -> None:
    """An allocator whose events carry no bytes in use has no peak to tell: one line."""
    from tracelens.analyze.memory import analyze
    from tracelens.core.model import MEMORY_SCHEMA

    mem = pl.DataFrame([{"host": "h", "allocator": "cuda:0", "seq": 0, "time_ns": 5,
                         "kind": "alloc", "allocation_bytes": 8, "address": 1}],
                       schema=MEMORY_SCHEMA)
    res = analyze(mem)
    assert res.devices == () and res.without == (
        "h: allocator cuda:0: 1 events without the allocator's bytes in use",)


def test_cli_json_and_no_events(tmp_path: Path) -> None:
    """The JSON is the result; a trace without allocator events says so in one line."""
    out = cli("memory", str(_kineto_job(tmp_path)), "--format", "json")
    doc = json.loads(out.stdout)
    assert [d["allocator"] for d in doc["devices"]] == ["cpu", "cuda:0"]
    assert doc["devices"][1]["peak_bytes"] == PRE + 800 and doc["without"] == []
    r = TraceAnalysis(MEM / "plain.xplane.pb.gz").memory_report()  # a notebook's view
    assert len(repr(r)) < 2000 and len(r._repr_html_()) < 10_000
    assert r.to_dict() == tracelens.to_json.__globals__["encode"](r)
    empty = ROOT / "sample_traces" / "h100_8gpu_moe_ddp.xplane.pb"
    out = cli("memory", str(empty))
    assert out.returncode == 0
    assert out.stdout == (
        f"{empty}: no allocator events (XSpace MemoryAllocation/MemoryDeallocation, Kineto "
        "[memory]): nothing to say about its memory\n")


def test_real_kineto_peak_by_hand() -> None:
    """A real ROCm Kineto trace with profile_memory: the peak is the largest Total Allocated
    of its HIP device's [memory] events (read here straight from the JSON)."""
    import gzip

    path = ROOT.parent / "shared" / "traces" / "kineto" / "mi300x_inference" / \
        "normalization_layers_2gpu.json.gz"
    if not path.exists():
        pytest.skip("the shared real traces are not beside the checkout")
    evs = [e for e in json.loads(gzip.open(path).read())["traceEvents"]
           if e.get("name") == "[memory]" and e["args"].get("Device Type") == 6]
    (gpu,) = [d for d in TraceAnalysis(path).memory_report().devices if d.allocator == "hip:0"]
    assert gpu.events == len(evs) == 415
    assert gpu.peak_bytes == max(e["args"]["Total Allocated"] for e in evs)
    assert gpu.reserved_bytes is not None and gpu.capacity_source == "device properties"


def test_a_full_device_is_a_finding() -> None:
    """bigbatch peaks at 99.3% of the chip: one finding, with what is left and what holds the
    most (58 bf16 [24,512,4096] buffers, 96 MiB each); plain (41%) has none."""
    big = TraceAnalysis(MEM / "bigbatch.xplane.pb.gz").memory_report(top=1)
    (f,) = big.findings
    d = big.devices[0]
    assert (f.kind, f.target, f.saved_ns) == ("memory_peak", "runsc/0", None)
    assert f"{(d.capacity_bytes - d.peak_bytes) / 2**30:,.2f} GiB left" in f.title
    assert d.most is not None and (d.most.count, d.most.allocation_bytes) == (58, 96 * 2**20)
    assert "58 × bf16[24,512,4096]" in f.evidence
    assert TraceAnalysis(MEM / "plain.xplane.pb.gz").memory_report().findings == ()


def test_compare_names_the_change_of_peak_memory() -> None:
    """compare of the plain and remat runs: the peak in use of the chip, each run's as
    XProf reads it, and the change."""
    c = tracelens.compare(str(MEM / "plain.xplane.pb.gz"), str(MEM / "remat.xplane.pb.gz"))
    (m,) = c.memory
    base, new = (FIGURES[v]["0"]["peak_bytes_in_use"] for v in ("plain", "remat"))
    assert (m.host, m.allocator, m.base_peak_bytes, m.new_peak_bytes) == ("runsc", "0", base,
                                                                          new)
    assert m.delta_bytes == new - base == -5_492_299_264
    out = cli("compare", str(MEM / "plain.xplane.pb.gz"), str(MEM / "remat.xplane.pb.gz"))
    assert "Peak memory in use" in out.stdout and "-5.1 GiB (-78.6%)" in out.stdout


def test_summarize_all_shows_memory() -> None:
    """``summarize --all``: the memory table and the finding, and the JSON's ``memory``;
    without --all neither (the files are not searched)."""
    big = str(MEM / "bigbatch.xplane.pb.gz")
    out = cli("summarize", big, "--all")
    assert "Memory: peak in use per allocator" in out.stdout
    assert "58 × bf16[24,512,4096] (5.4 GiB)" in out.stdout
    assert "Free memory on runsc/device 0: its peak is 99.3% of its memory" in out.stdout
    doc = json.loads(cli("summarize", big, "--all", "--format", "json").stdout)
    assert doc["memory"]["devices"][0]["peak_bytes"] == FIGURES["bigbatch"]["0"][
        "peak_bytes_in_use"]
    assert doc["findings"]["items"][-1]["kind"] == "memory_peak"
    assert "memory" not in json.loads(cli("summarize", big, "--format", "json").stdout)


def test_report_draws_the_memory_timeline(tmp_path: Path) -> None:
    """The report's memory chart: the allocator's bytes in use (at most TIMELINE_POINTS,
    the peak among them), the peak marked, the capacity dashed; no section without
    allocator events."""
    from reports.html.figures_memory import memory_figure
    from tracelens.analyze.memory import TIMELINE_POINTS

    a = TraceAnalysis(MEM / "remat.xplane.pb.gz")
    assert a.summarize().memory is None  # only when asked (--all): it searches the files
    s = a.summarize(memory=True)
    assert s.memory is not None
    (d,) = s.memory.devices
    assert len(d.timeline) == min(TIMELINE_POINTS, d.events)
    assert max(b for _, b in d.timeline) == d.peak_bytes == 1_491_168_768
    fig = memory_figure(s)
    assert fig is not None
    line, peak, cap = fig["data"]  # type: ignore[misc]
    assert peak["y"] == [round(d.peak_bytes / 2**30, 6)]
    assert cap["y"] == [round(16_909_336_064 / 2**30, 6)] * 2
    out = tmp_path / "r.html"
    a.report(out, memory=True)
    assert '<section id="memory">' in out.read_text()
    a.report(out)  # only when asked: the memory events are a second pass over the files
    assert '<section id="memory">' not in out.read_text()
    assert cli("report", str(MEM / "remat.xplane.pb.gz"), "-o", str(out), "--memory",
               "--quiet").returncode == 0
    assert '<section id="memory">' in out.read_text()
    out2 = tmp_path / "none.html"
    TraceAnalysis(ROOT / "sample_traces" / "h100_8gpu_moe_ddp.xplane.pb").report(
        out2, memory=True)
    assert '<section id="memory">' not in out2.read_text()


# -- several hosts: each host's events on its own clock, in its own file's steps ------------

STRAGGLER = ROOT / "sample_traces" / "mi355x_2x8gpu_straggler"


def _hosts_with_memory(tmp: Path) -> Path:
    """The 2-host sample (two XSpace files, 2 steps of ~30 ms each) with allocator events on
    GPU 3 of each host: node0 peaks at 40 MiB in step 0 (10 ms), node1 at 70 MiB in step 1
    (40 ms), on their own clocks."""
    import shutil

    from tracelens_dev.writers.xspace_memory import AllocatorEvent, add_allocator_events

    job = tmp / "job"
    shutil.copytree(STRAGGLER, job)
    mib = 1 << 20
    for f, peak_ms, big in ((sorted(job.rglob("*node0.xplane.pb"))[0], 10, 30),
                            (sorted(job.rglob("*node1.xplane.pb"))[0], 40, 60)):
        add_allocator_events(f, [
            AllocatorEvent(5 * MS, 0xA000, 10 * mib, 10 * mib, allocator="GPU_3_bfc",
                           op="params", shape="f32[2621440]"),
            AllocatorEvent(peak_ms * MS, 0xB000, big * mib, (10 + big) * mib,
                           allocator="GPU_3_bfc", op="acts", shape="bf16[1024,1024]"),
            AllocatorEvent((peak_ms + 1) * MS, 0xB000, big * mib, 10 * mib, free=True,
                           allocator="GPU_3_bfc")])
    return job


MS = 1_000_000


def test_several_hosts_each_on_its_own_clock(tmp_path: Path) -> None:
    job = _hosts_with_memory(tmp_path)
    res = TraceAnalysis(job).memory_report()
    got = {(d.host, d.allocator): (d.device, d.peak_bytes, d.peak_time_ns, d.peak_step,
                                   d.peak_op, d.live_count)
           for d in res.devices}
    assert got == {("mi355x-node0", "GPU_3_bfc"): (3, 40 << 20, 10 * MS, 0, "acts", 2),
                   ("mi355x-node1", "GPU_3_bfc"): (3, 70 << 20, 40 * MS, 1, "acts", 2)}
    # each file alone gives its host's answer
    for f in sorted(job.rglob("*.xplane.pb")):
        (alone,) = TraceAnalysis(f).memory_report().devices
        assert alone in res.devices
    # summarize (the engine path, per host) shows both peaks, steps left to `memory`
    s = TraceAnalysis(job).summarize(memory=True)
    assert s.memory is not None
    assert sorted((d.host, d.peak_bytes, d.peak_step) for d in s.memory.devices) == [
        ("mi355x-node0", 40 << 20, None), ("mi355x-node1", 70 << 20, None)]
    assert s.memory.warnings


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A truncated XSpace without allocator events is still a bad input, not "no events"."""
    bad = tmp_path / "cut.xplane.pb"
    bad.write_bytes((ROOT / "sample_traces" / "h100_8gpu_moe_ddp.xplane.pb").read_bytes()[:100_000])
    out = cli("memory", str(bad))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"error: {bad}: corrupt or truncated XSpace protobuf")
    assert len(out.stderr.splitlines()) == 1
