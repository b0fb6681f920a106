"""``tracelens hlo``: collectives and findings read from compiled HLO, joined to the timeline.

Real programs: sample_traces/hlo (XLA:CPU, made by sample_traces/hlo/make_hlo.py), the CPU
data-parallel trace and the MI300X traces of ../shared. Constructed GPU-style modules (async
pairs, schedules, cross-host groups, loops) come from tests/hlo_build.py with known answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import CPU_TRACE, cli, real_trace
from tests.hlo_build import ModuleBuilder
from tracelens.analyze.communication.collectives import collective_activities
from tracelens.analyze.compute.hlo_findings import (finding_for, lens_dump, lens_trace, measured,
                                            top_findings)
from tracelens.classify import explain
from parsers.hlo.dump import load_dump, schedule_from_proto
from tracelens.hlo.lens import SMALL_MIN_COUNT, HostMap, analyze_module
from parsers.hlo.proto import module_from_proto
from parsers.hlo.text import parse_module
from tracelens.loading.loader import load

ROOT = Path(__file__).resolve().parents[1]
HLO = ROOT / "sample_traces" / "hlo"
PLANTED = HLO / "planted.xplane.pb"
LOOP = HLO / "module_0024.loop_step.after_optimizations.txt"
UPCAST = HLO / "module_0026.upcast_step.after_optimizations.txt"
SMALL = HLO / "module_0028.small_step.after_optimizations.txt"


def _static(path: Path):
    return lens_dump([load_dump(path)])


# -- real XLA:CPU programs ----------------------------------------------------------------

def test_loop_psum_is_found_with_trip_count_and_bytes_per_step():
    res = _static(LOOP)
    (prog,) = res.programs
    (c,) = prog.collectives
    assert (c.name, c.opcode, c.dtype, c.bytes, c.group_size) == ("psum.13", "all-reduce",
                                                                 "f32", 256 * 128 * 4, 8)
    assert c.in_loop and c.loop == "while.15" and c.trip_count == 4
    assert c.executions_per_step == 4 and c.bytes_per_step == 4 * 131072
    assert [(f.kind, f.instruction, f.bytes_per_step) for f in res.findings] == [
        ("collective-in-loop", "psum.13", 524288)]


def test_upcast_psum_is_found_through_the_fusion_root():
    res = _static(UPCAST)
    assert [(f.kind, f.instruction, f.bytes_per_step) for f in res.findings] == [
        ("upcast-collective", "psum.7", 131072)]
    assert "bf16" in res.findings[0].message and "convert.40" in res.findings[0].message


def test_sixteen_pmaxes_are_one_combined_all_reduce_and_not_flagged():
    """XLA:CPU combined the sixteen pmax into one tuple all-reduce: one small collective per
    step is not 'many'. Before the /*index=N*/ comment fix the dump did not even parse."""
    res = _static(SMALL)
    (c,) = res.programs[0].collectives
    assert c.name == "all-reduce" and len(c.operands) == 16
    assert c.bytes == 16 * 64 * 4 and c.executions_per_step == 1
    assert res.findings == ()


def test_text_with_index_comments_keeps_the_whole_line():
    text = ("HloModule m\n\nENTRY main {\n  p = f32[2] parameter(0)\n"
            "  t = (f32[2], f32[2], f32[2], f32[2], f32[2], /*index=5*/f32[2]) "
            "tuple(p, p, p, p, p, /*index=5*/p)\n}\n")
    t = parse_module(text).entry_computation.instructions["t"]
    assert len(t.operands) == 6 and len(t.shape.tuple_shapes) == 6


def test_serialized_hlo_proto_dump_reads_like_the_text_dump():
    proto = _static(HLO / "upcast_step.hlo.pb")
    text = _static(UPCAST)
    assert proto.programs[0].scheduled
    assert [(f.kind, f.instruction, f.bytes_per_step) for f in proto.findings] == \
        [(f.kind, f.instruction, f.bytes_per_step) for f in text.findings]


def test_psum_named_collectives_classify_by_their_opcode():
    """JAX 0.10 names all-reduces after the primitive (psum.13): before the fix they fell to
    other.fallback and the collectives analysis never saw them."""
    m = explain("psum.13", op="psum.13", hlo="collective:all-reduce")
    assert (m.category, m.subcategory) == ("collective", "all-reduce")
    trace = load([PLANTED])
    ev = trace.events.filter(pl.col("op").is_in(["psum.13", "psum.7"]))
    assert ev.height and set(ev["category"].cast(pl.String)) == {"collective"}
    assert set(ev["subcategory"]) == {"all-reduce"}


def test_planted_trace_findings_and_their_measured_cost():
    trace = load([PLANTED])
    res = lens_trace(trace)
    got = [(f.kind, f.program_id, f.instruction, f.bytes_per_step) for f in res.findings]
    assert got == [("collective-in-loop", 24, "psum.13", 524288),
                   ("upcast-collective", 26, "psum.7", 131072)]
    # The cost equals the collectives analysis's exposure of that op, per device-step.
    acts = collective_activities(trace.events).filter(pl.col("step").is_not_null())
    for f in res.findings:
        mine = acts.filter((pl.col("program_id") == f.program_id) & (pl.col("op") ==
                                                                      f.instruction))
        per = mine.group_by("host", "rank", "device", "step").agg(pl.col("exposed_ns").sum())
        assert per.height == 8 * 3  # eight devices, three steps
        assert f.exposed_ns_per_step == pytest.approx(per["exposed_ns"].mean(), abs=1e-6)
        assert f.exposed_ns_per_step > 0
    # In the trace the loop's all-reduce runs four times per device and step.
    loop_acts = acts.filter(pl.col("op") == "psum.13").group_by("device", "step").len()
    assert set(loop_acts["len"]) == {4}


def test_trace_and_dump_agree_on_every_collective():
    res = lens_trace(load([PLANTED]))
    by_id = {p.program_id: p for p in res.programs}
    for path in (LOOP, UPCAST, SMALL):
        dump = _static(path).programs[0]
        assert [(c.name, c.bytes, c.trip_count, c.bytes_per_step) for c in dump.collectives] \
            == [(c.name, c.bytes, c.trip_count, c.bytes_per_step)
                for c in by_id[dump.program_id].collectives]
        assert all(c.spans_hosts is False for c in by_id[dump.program_id].collectives)


def test_cpu_dp_allreduce_entry_collective_no_findings():
    res = lens_trace(load([real_trace(CPU_TRACE)]))
    colls = [c for p in res.programs for c in p.collectives]
    assert [(c.program_id, c.name, c.bytes, c.group_size, c.executions_per_step, c.in_loop,
             c.computation) for c in colls] == [(12, "all-reduce.3", 786436, 4, 1, False,
                                                 "main.0_spmd")]
    assert res.findings == ()


@pytest.mark.parametrize("name", ["mi300x_jax08_gemm", "mi300x_jax08_attention",
                                  "mi300x_jax08_conv_8gpu"])
def test_mi300x_programs_have_no_collectives_and_no_findings(name):
    res = lens_trace(load([real_trace(f"{name}.xplane.pb")]))
    assert res.programs and not any(p.collectives for p in res.programs)
    assert res.findings == ()


# -- constructed GPU-style modules --------------------------------------------------------

def _async_module(with_compute: bool, scheduled: bool = True) -> bytes:
    """all-reduce-start/done with (or without) a fusion scheduled between them."""
    b = ModuleBuilder("jit_async", 7, partitions=8)
    add = b.computation("add")
    b.inst(add, "x", "parameter", "f32[]", parameter_number=0)
    b.inst(add, "y", "parameter", "f32[]", parameter_number=1)
    b.inst(add, "s", "add", "f32[]", ("x", "y"), root=True)
    fused = b.computation("fused", fusion=True)
    b.inst(fused, "fp", "parameter", "bf16[64,64]", parameter_number=0)
    b.inst(fused, "fm", "multiply", "bf16[64,64]", ("fp", "fp"), root=True)
    e = b.computation("main")
    b.inst(e, "p0", "parameter", "bf16[1024,1024]", parameter_number=0)
    b.inst(e, "p1", "parameter", "bf16[64,64]", parameter_number=1)
    b.inst(e, "ars", "all-reduce-start", "bf16[1024,1024]", ("p0",), calls=("add",),
           channel_id=1, use_global_device_ids=True,
           replica_groups=lambda g: g.add().replica_ids.extend(range(8)))
    order = ["p0", "p1", "ars"]
    if with_compute:
        b.inst(e, "fusion.1", "fusion", "bf16[64,64]", ("p1",), calls=("fused",),
               fusion_kind="kLoop")
        order.append("fusion.1")
    b.inst(e, "ard", "all-reduce-done", "bf16[1024,1024]", ("ars",), root=not with_compute)
    order.append("ard")
    if with_compute:
        b.inst(e, "out", "tuple", ("bf16[1024,1024]", "bf16[64,64]"), ("ard", "fusion.1"),
               root=True)
        order.append("out")
    b.entry(e)
    if scheduled:
        seq = b.proto.hlo_module.schedule.sequences.add(key=e.id)
        ids = {i.name: i.id for i in e.instructions}
        seq.value.instruction_ids.extend(ids[n] for n in order)
    return b.bytes()


def test_async_pair_with_compute_between_is_not_flagged():
    blob = _async_module(with_compute=True)
    lens = analyze_module(module_from_proto(blob), schedule_from_proto(blob))
    (c,) = lens.collectives
    assert c.is_async and c.done == "ard" and c.bytes == 1024 * 1024 * 2
    assert c.overlap_ops == 1 and c.overlap_flops == 64 * 64  # one multiply per element
    assert c.overlap_bytes == 2 * 64 * 64 * 2
    assert lens.findings == ()


def test_async_pair_with_nothing_between_is_flagged():
    blob = _async_module(with_compute=False)
    lens = analyze_module(module_from_proto(blob), schedule_from_proto(blob))
    assert [(f.kind, f.instruction, f.instructions) for f in lens.findings] == [
        ("no-overlap-window", "ars", ("ars", "ard"))]


def test_async_pair_without_schedule_is_unknown_not_flagged():
    blob = _async_module(with_compute=False, scheduled=False)
    lens = analyze_module(module_from_proto(blob), schedule_from_proto(blob))
    (c,) = lens.collectives
    assert c.overlap_ops is None and c.overlap_flops is None and not lens.scheduled
    assert lens.findings == () and lens.notes


def _grouped_module(groups: list[list[int]]) -> bytes:
    b = ModuleBuilder("jit_groups", 9, partitions=8)
    add = b.computation("add")
    b.inst(add, "x", "parameter", "f32[]", parameter_number=0)
    b.inst(add, "y", "parameter", "f32[]", parameter_number=1)
    b.inst(add, "s", "add", "f32[]", ("x", "y"), root=True)
    e = b.computation("main")
    b.inst(e, "p0", "parameter", "f32[256,256]", parameter_number=0)

    def fill(rg):
        for g in groups:
            rg.add().replica_ids.extend(g)
    b.inst(e, "all-reduce.1", "all-reduce", "f32[256,256]", ("p0",), calls=("add",),
           channel_id=1, use_global_device_ids=True, replica_groups=fill, root=True)
    b.entry(e)
    return b.bytes()


@pytest.mark.parametrize("groups,spans", [([[0, 1, 2, 3], [4, 5, 6, 7]], False),
                                          ([[0, 4], [1, 5], [2, 6], [3, 7]], True)])
def test_cross_host_groups(groups, spans):
    blob = _grouped_module(groups)
    hosts = HostMap(host_of=lambda d: f"h{d // 4}")
    lens = analyze_module(module_from_proto(blob), None, hosts)
    (c,) = lens.collectives
    assert c.spans_hosts is spans
    kinds = [(f.kind, f.bytes_per_step) for f in lens.findings]
    assert kinds == ([("cross-host", 256 * 256 * 4)] if spans else [])
    # Without a device→host map on a multi-host job it is unknown, and never flagged.
    unknown = analyze_module(module_from_proto(blob), None, HostMap(hosts=2))
    assert unknown.collectives[0].spans_hosts is None and unknown.findings == ()


def _text(body: str) -> str:
    return ("HloModule m, is_scheduled=true\n\n%add (x: f32[], y: f32[]) -> f32[] {\n"
            "  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n"
            "  ROOT %s = f32[] add(%x, %y)\n}\n\n" + body)


def test_small_collectives_threshold_and_repeated_gather():
    def module(n: int) -> str:
        lines = [f"  %ar.{k} = f32[16]{{0}} all-reduce(%p), channel_id={k + 1}, "
                 "replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add"
                 for k in range(n)]
        return _text("ENTRY %main (p: f32[16]) -> f32[16] {\n  %p = f32[16]{0} parameter(0)\n"
                     + "\n".join(lines) + f"\n  ROOT %r = f32[16]{{0}} copy(%ar.{n - 1})\n}}\n")
    few = analyze_module(parse_module(module(SMALL_MIN_COUNT - 1), program_id=1), None)
    assert few.findings == ()
    many = analyze_module(parse_module(module(SMALL_MIN_COUNT), program_id=1), None)
    (f,) = many.findings
    assert f.kind == "small-collectives" and f.bytes_per_step == SMALL_MIN_COUNT * 64
    assert len(f.instructions) == SMALL_MIN_COUNT

    gathers = _text(
        "ENTRY %main (p: bf16[8,128]) -> bf16[64,128] {\n  %p = bf16[8,128]{1,0} parameter(0)\n"
        "  %b = bf16[8,128]{1,0} bitcast(%p)\n"
        "  %ag.1 = bf16[64,128]{1,0} all-gather(%p), channel_id=1, replica_groups={{0,1,2,3,4,"
        "5,6,7}}, dimensions={0}, use_global_device_ids=true\n"
        "  %ag.2 = bf16[64,128]{1,0} all-gather(%b), channel_id=2, replica_groups={{0,1,2,3,4,"
        "5,6,7}}, dimensions={0}, use_global_device_ids=true\n"
        "  ROOT %r = bf16[64,128]{1,0} add(%ag.1, %ag.2)\n}\n")
    (g,) = analyze_module(parse_module(gathers, program_id=2), None).findings
    assert (g.kind, g.instructions, g.bytes_per_step) == ("repeated-gather", ("ag.1", "ag.2"),
                                                           2 * 64 * 128 * 2)


def test_loops_multiply_and_unknown_trip_counts_stay_unknown():
    def loop(config: str) -> str:
        return _text(
            "%cond (c: (s32[], f32[32])) -> pred[] {\n  %c = (s32[], f32[32]) parameter(0)\n"
            "  %i = s32[] get-tuple-element(%c), index=0\n  %n = s32[] constant(3)\n"
            "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}\n\n"
            "%body (b: (s32[], f32[32])) -> (s32[], f32[32]) {\n"
            "  %b = (s32[], f32[32]) parameter(0)\n  %i = s32[] get-tuple-element(%b), index=0\n"
            "  %v = f32[32]{0} get-tuple-element(%b), index=1\n"
            "  %ar = f32[32]{0} all-reduce(%v), channel_id=1, replica_groups={{0,1}}, "
            "use_global_device_ids=true, to_apply=%add\n"
            "  ROOT %t = (s32[], f32[32]) tuple(%i, %ar)\n}\n\n"
            "ENTRY %main (p: (s32[], f32[32])) -> (s32[], f32[32]) {\n"
            "  %p = (s32[], f32[32]) parameter(0)\n"
            f"  ROOT %w = (s32[], f32[32]) while(%p), condition=%cond, body=%body{config}\n}}\n")
    known = analyze_module(parse_module(
        loop(', backend_config={"known_trip_count":{"n":"3"}}'), program_id=3), None)
    (c,) = known.collectives
    assert (c.trip_count, c.executions_per_step, c.bytes_per_step) == (3, 3, 3 * 128)
    assert known.findings[0].kind == "collective-in-loop"
    unknown = analyze_module(parse_module(loop(""), program_id=3), None)
    (c,) = unknown.collectives
    assert c.in_loop and c.trip_count is None and c.bytes_per_step is None
    (f,) = unknown.findings
    assert f.bytes_per_step is None and "unknown trip count" in f.message


def test_synchronous_gpu_collectives_with_compute_in_the_step_are_flagged():
    """The synthetic H100 MoE sample: its twelve all-to-alls and the loss all-reduce are
    synchronous on GPUs that compute in the same steps; its async all-reduce-starts are not
    judged (the sample's module carries no schedule)."""
    trace = load([ROOT / "sample_traces" / "h100_8gpu_moe_ddp.xplane.pb"])
    res = lens_trace(trace)
    flagged = {f.instruction for f in res.findings if f.kind == "no-overlap-window"}
    sync = {c.name for p in res.programs for c in p.collectives if not c.is_async}
    assert flagged == sync and len(sync) == 13
    assert all(c.overlap_ops is None for p in res.programs for c in p.collectives if c.is_async)
    acts = collective_activities(trace.events).filter(pl.col("step").is_not_null())
    for f in res.findings:
        mine = acts.filter((pl.col("program_id") == f.program_id)
                           & pl.col("op").is_in(list(f.instructions)))
        per = mine.group_by("host", "rank", "device", "step").agg(pl.col("exposed_ns").sum())
        assert f.exposed_ns_per_step == pytest.approx(per["exposed_ns"].mean(), abs=1e-6)


def test_nested_loops_multiply_and_two_call_sites_add_up():
    text = _text(
        "%cond (c: (s32[], f32[8])) -> pred[] {\n  %c = (s32[], f32[8]) parameter(0)\n"
        "  ROOT %k = pred[] constant(true)\n}\n\n"
        "%inner (b: (s32[], f32[8])) -> (s32[], f32[8]) {\n  %b = (s32[], f32[8]) parameter(0)\n"
        "  %v = f32[8]{0} get-tuple-element(%b), index=1\n  %i = s32[] get-tuple-element(%b), "
        "index=0\n  %ar = f32[8]{0} all-reduce(%v), channel_id=1, replica_groups={{0,1}}, "
        "use_global_device_ids=true, to_apply=%add\n"
        "  ROOT %t = (s32[], f32[8]) tuple(%i, %ar)\n}\n\n"
        "%outer (o: (s32[], f32[8])) -> (s32[], f32[8]) {\n  %o = (s32[], f32[8]) parameter(0)\n"
        '  ROOT %w2 = (s32[], f32[8]) while(%o), condition=%cond, body=%inner, '
        'backend_config={"known_trip_count":{"n":"3"}}\n}\n\n'
        "%sub (q: f32[8]) -> f32[8] {\n  %q = f32[8]{0} parameter(0)\n"
        "  ROOT %ag = f32[16]{0} all-gather(%q), channel_id=2, replica_groups={{0,1}}, "
        "dimensions={0}, use_global_device_ids=true\n}\n\n"
        "ENTRY %main (p: (s32[], f32[8]), x: f32[8]) -> f32[16] {\n"
        "  %p = (s32[], f32[8]) parameter(0)\n  %x = f32[8]{0} parameter(1)\n"
        '  %w1 = (s32[], f32[8]) while(%p), condition=%cond, body=%outer, '
        'backend_config={"known_trip_count":{"n":"2"}}\n'
        "  %c1 = f32[16]{0} call(%x), to_apply=%sub\n  %c2 = f32[16]{0} call(%x), to_apply=%sub\n"
        "  ROOT %r = f32[16]{0} add(%c1, %c2)\n}\n")
    lens = analyze_module(parse_module(text, program_id=4), None)
    by = {c.name: c for c in lens.collectives}
    assert (by["ar"].trip_count, by["ar"].executions_per_step, by["ar"].loop) == (6, 6, "w2")
    assert by["ar"].bytes_per_step == 6 * 32
    assert (by["ag"].in_loop, by["ag"].executions_per_step, by["ag"].bytes_per_step) == (
        False, 2, 2 * 64)


@pytest.mark.parametrize("sample", ["mi300x_8gpu_llama_step", "mi355x_8gpu_llama_fsdp"])
def test_async_wrapped_collectives_pair_and_match_the_events(sample):
    """The synthetic samples wrap reduce-scatters in async-start/async-done and run
    all-gather-start/-done pairs: each pair is one collective with its done, and its bytes are
    the msg_bytes the cost model gave its kernels."""
    trace = load([ROOT / "sample_traces" / f"{sample}.xplane.pb"])
    (prog,) = [p for p in lens_trace(trace).programs if p.collectives]
    ev = trace.events.filter(pl.col("category") == "collective").group_by("op").agg(
        pl.col("msg_bytes").unique())
    msg = dict(ev.iter_rows())
    asyncs = [c for c in prog.collectives if c.is_async]
    assert asyncs and all(c.done for c in asyncs)
    assert {c.opcode for c in asyncs} >= {"all-gather", "reduce-scatter"}
    named = {n: c for c in prog.collectives for n in c.op_names}
    assert set(msg) <= set(named)  # every collective kernel's op is one of the lens's names
    for op, sizes in msg.items():
        assert sizes == [named[op].bytes], op
    wrapped = [c for c in prog.collectives if c.wrapped]
    assert wrapped and all(c.wrapped in msg for c in wrapped)
    # ... so a finding about it is costed from those kernels (before: null, no activity)
    acts = collective_activities(trace.events)
    for c in wrapped:
        exposed, note = measured(acts, c.program_id, c.op_names)
        assert exposed is not None and not note


# -- integration and CLI -----------------------------------------------------------------

def test_top_findings_and_finding_for():
    trace = load([PLANTED])
    top = top_findings(trace, top=1)
    assert [f.instruction for f in top] == ["psum.13"]
    assert finding_for(lens_trace(trace).findings, "all-reduce").startswith("psum.13 ")
    assert finding_for(top, "all-gather") is None


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``tracelens hlo ARGS`` in this process."""
    return cli("hlo", *args)


def test_cli_json_contract_and_determinism(tmp_path):
    # a fresh interpreter (its own hash seed) gives what this process gives
    out = subprocess.run([sys.executable, "-c", "from tracelens.cli.commands import main; main()",
                          "hlo", str(PLANTED), "--format", "json"], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    coll = {"name", "opcode", "dtype", "bytes", "group_size", "async", "computation", "in_loop",
            "trip_count", "executions_per_step", "bytes_per_step", "spans_hosts",
            "overlap_flops"}
    assert all(coll <= set(c) for p in rep["programs"] for c in p["collectives"])
    assert all({"module", "program_id", "collectives"} <= set(p) for p in rep["programs"])
    assert all({"kind", "program", "instruction", "message", "bytes_per_step",
                "exposed_ns_per_step"} <= set(f) for f in rep["findings"])
    assert [f["kind"] for f in rep["findings"]] == ["collective-in-loop", "upcast-collective"]
    again = _cli(str(PLANTED), "--format", "json")
    assert again.stdout == out.stdout
    html = tmp_path / "hlo.html"
    md = _cli(str(LOOP), "--format", "markdown", "--html", str(html))
    assert md.returncode == 0 and "collective-in-loop" in md.stdout
    assert "psum.13" in html.read_text()
    one = json.loads(_cli(str(PLANTED), "--program", "jit_upcast_step", "--format",
                          "json").stdout)
    assert [p["program_id"] for p in one["programs"]] == [26]


def test_summarize_and_report_show_the_top_findings(tmp_path):
    out = cli("summarize", str(PLANTED), "--format", "json")
    found = json.loads(out.stdout)["hlo_findings"]
    assert [(f["kind"], f["instruction"]) for f in found] == [
        ("collective-in-loop", "psum.13"), ("upcast-collective", "psum.7")]
    html = tmp_path / "r.html"
    assert cli("report", str(PLANTED), "-o", str(html), "--quiet").returncode == 0
    text = html.read_text()
    assert "psum.13 [jit_loop_step(24)]" in text and "upcast-collective" in text


@pytest.mark.parametrize("content,name", [(b"", "x.after_optimizations.txt"),
                                          (b"\xff\xfe garbage {{{", "m.txt"),
                                          (b"\x0a\xff\xff\xff", "m.hlo.pb")])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, content, name):
    path = tmp_path / name
    path.write_bytes(content)
    out = _cli(str(path))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"error: {path}: ") and out.stderr.count("\n") == 1


def test_truncated_entry_computation_is_an_input_error(tmp_path):
    text = LOOP.read_text()
    path = tmp_path / "module_0024.cut.after_optimizations.txt"
    path.write_text(text[:text.index("ROOT %multiply_subtract_fusion")])
    out = _cli(str(path))
    assert out.returncode == 2 and "truncated HLO text dump" in out.stderr


def test_cli_unknown_program_is_an_input_error():
    out = _cli(str(LOOP), "--program", "nope")
    assert out.returncode == 2 and "no program named or numbered 'nope'" in out.stderr


def test_an_xla_dump_directory_is_read_module_by_module(tmp_path: Path):
    """``tracelens hlo DIR`` on an ``--xla_dump_to`` directory (it said "directory holds no
    trace files"): one optimized module per id, its HloProto preferred to its text (it carries
    the schedule), with the backend-prefixed names of a real JAX 0.10 dump
    (``cpu_after_optimizations``); buffer assignments, memory reports, the modules before
    optimization and LLVM IR are not programs."""
    dump = tmp_path / "xla_dump"
    dump.mkdir()
    for src in (LOOP, UPCAST, SMALL, HLO / "module_0004.while_loops.after_optimizations.txt",
                HLO / "module_0004.while_loops.after_optimizations.hlo.pb"):
        name = src.name.replace(".after_optimizations", ".cpu_after_optimizations")
        (dump / name).write_bytes(src.read_bytes())
    for decoy in ("module_0024.loop_step.cpu_after_optimizations-buffer-assignment.txt",
                  "module_0024.loop_step.cpu_after_optimizations-memory-usage-report.txt",
                  "module_0024.loop_step.before_optimizations.txt",
                  "module_0024.loop_step.loop_step_kernel_module.ir-with-opt.ll",
                  "module_0024.loop_step.debug_options"):
        (dump / decoy).write_text("not an optimized module\n")
    res = cli("hlo", "--format", "json", str(dump))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert [p["program_id"] for p in got["programs"]] == [4, 24, 26, 28]
    one_by_one = [json.loads(cli("hlo", "--format", "json", str(f)).stdout)
                  for f in (HLO / "module_0004.while_loops.after_optimizations.hlo.pb",
                            LOOP, UPCAST, SMALL)]
    assert got["programs"] == [r["programs"][0] for r in one_by_one]
    key = ("kind", "program", "instruction", "bytes_per_step")
    assert sorted(tuple(f[k] for k in key) for f in got["findings"]) == sorted(
        tuple(f[k] for k in key) for r in one_by_one for f in r["findings"])
    assert got["findings"]
