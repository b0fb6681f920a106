"""Findings (issue 47): what to fix first, at the top of ``summarize`` and the report.

Truth: the planted straggler of the 2×8 sample (node1/GPU3 computes longer; the others wait
for it) is the first finding, named with the collectives' count of its late arrivals, and its
saving is the what-if solver's own (the critical-path command prints the same number: two
outputs of the tool never disagree). Shape: projected findings are ranked by saving, never
save more than the step, and come before the unprojected ones, which say why they have no
projection; what-ifs under the floor are counted, not dropped.
"""

from __future__ import annotations

import json

import pytest

import tracelens
from tracelens.analyze.summary.findings import FLOOR_PCT, findings
from tracelens.analyze.summary.build import summarize
from tracelens.results.findings import Findings, RankedFinding, findings_change

from .conftest import REAL_XPROF, SAMPLES, SHARED, cli

TRACES = SHARED / "traces"

STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"
SAMPLE_JOBS = [SAMPLES / "mi300x_8gpu_llama_step.xplane.pb",
               SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb",
               SAMPLES / "h100_8gpu_moe_ddp.xplane.pb", STRAGGLER]


@pytest.fixture(scope="module")
def straggler():  # type: ignore[no-untyped-def]
    return summarize(tracelens.load(STRAGGLER))


def test_planted_straggler_is_the_first_finding(straggler) -> None:  # type: ignore[no-untyped-def]
    truth = json.loads((SAMPLES / "mi355x_2x8gpu_straggler.truth.json").read_text())
    planted = truth["scenario"]["straggler"]  # host 1, device 3, 30% slower
    host = truth["hosts"][planted["host"]]["host"]
    top = straggler.findings.items[0]
    assert top.kind == "on_time"
    assert top.target == f"{host}/GPU{planted['device']}"
    g = straggler.collectives.stragglers[0]
    assert (g.host, g.device) == ("mi355x-node1", 3)
    assert f"it arrives last in {g.times_last} of {g.instances} collectives" in top.title
    assert top.saved_ns is not None and top.unprojected is None


def test_savings_are_the_critical_path_what_ifs(straggler) -> None:  # type: ignore[no-untyped-def]
    """Every projected finding's saving equals the what-if of ``tracelens critical-path``
    for the same step (the command's JSON), so the findings and the path never disagree."""
    step = straggler.findings.step
    out = cli("critical-path", str(STRAGGLER), "--step", str(step), "--format", "json")
    assert out.returncode == 0, out.stderr
    what_if = {f"{w['change']} {w['target']}": w["saved_ns"]
               for w in json.loads(out.stdout)["what_if"]}
    projected = [f for f in straggler.findings.items if f.saved_ns is not None]
    assert projected
    for f in projected:
        assert what_if[f.key] == f.saved_ns, f.key


@pytest.mark.parametrize("path", SAMPLE_JOBS, ids=lambda p: p.name)
def test_ranked_projected_first_and_bounded(path) -> None:  # type: ignore[no-untyped-def]
    fs = summarize(tracelens.load(path)).findings
    items = list(fs.items)
    assert items, "every bundled sample has something to fix"
    projected = [f for f in items if f.saved_ns is not None]
    rest = [f for f in items if f.saved_ns is None]
    assert items == projected + rest
    assert [f.saved_ns for f in projected] == sorted((f.saved_ns for f in projected),
                                                     reverse=True)
    for f in projected:
        assert 0 < f.saved_ns <= fs.step_ns
        assert f.saved_pct == pytest.approx(100.0 * f.saved_ns / fs.step_ns)
        assert f.saved_pct >= FLOOR_PCT
    for f in rest:
        assert f.unprojected, f.key
    assert len({f.key for f in items}) == len(items), "one finding per change"


def test_hidden_all_gathers_on_the_mi355x_sample() -> None:
    """The MI355X sample's exposed all-gathers (23.5% of its time is exposed communication)
    are a finding whose saving is the solver's hide what-if, with the exposure as evidence."""
    s = summarize(tracelens.load(SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb"))
    f = next(f for f in s.findings.items if f.key == "hide all-gather")
    ag = next(t for t in s.collectives.by_type if t.type == "all-gather")
    assert f.saved_ns and f.saved_ns > 0
    assert f"{ag.exposed_ns / 1e6:,.3f} of {ag.sum_ns / 1e6:,.3f} ms exposed" in f.evidence
    assert f.title == "Overlap the all-gathers with compute"


def test_host_bound_path_is_a_finding_without_projection() -> None:
    """A real JAX trace whose devices are 97% idle: its path is host work, which no what-if
    moves; the finding says so instead of presenting a launch what-if as the answer."""
    path = REAL_XPROF / "mi300x_jax08_conv_8gpu.xplane.pb"
    if not path.exists():
        pytest.skip("shared traces are not beside this checkout")
    s = summarize(tracelens.load(path))
    f = next(f for f in s.findings.items if f.kind == "host_bound")
    assert f.saved_ns is None and "not the host's own work" in (f.unprojected or "")
    host = sum(c.ns for c in s.critical_path.composition if c.component == "host")
    assert host >= 0.5 * s.critical_path.step_ns


def test_below_floor_counted_not_dropped(straggler) -> None:  # type: ignore[no-untyped-def]
    from tracelens.results.critical_path import WhatIf

    tiny = WhatIf("roofline", "memory", 1_000_000, 999_999, 1, 5)
    big = WhatIf("hide", "all-gather", 1_000_000, 500_000, 500_000, 600_000)
    fs = findings(straggler, [tiny, big])
    assert [f.key for f in fs.items if f.saved_ns is not None] == ["hide all-gather"]
    assert fs.below_floor == ("roofline memory",)


def test_without_critical_path_nothing_is_projected() -> None:
    out = cli("summarize", str(STRAGGLER), "--category", "gemm", "--category", "collective",
              "--format", "json")
    assert out.returncode == 0, out.stderr
    fs = json.loads(out.stdout)["findings"]
    assert fs["step_ns"] is None
    assert fs["items"], "the straggler and the exposure are still measured"
    for f in fs["items"]:
        assert f["saved_ns"] is None and "per-row filters" in f["unprojected"]


def test_findings_change_names_appeared_and_vanished() -> None:
    def f(kind: str, target: str) -> RankedFinding:
        return RankedFinding(kind, target, f"{kind} {target}", 1, 1.0, "", "")
    base = Findings((f("hide", "all-gather"), f("on_time", "h/GPU3")), 1, 10, 1.0)
    new = Findings((f("hide", "all-gather"), f("graph_launch", "host launches")), 1, 10, 1.0)
    ch = findings_change(base, new)
    assert [x.key for x in ch.appeared] == ["graph_launch host launches"]
    assert [x.key for x in ch.vanished] == ["on_time h/GPU3"]
    assert not findings_change(base, base)


def test_compare_names_findings_that_appeared_or_vanished() -> None:
    """``compare``'s findings change is what the two runs' ``summarize`` say: the keys of
    new's findings that base lacks, and the reverse (two outputs of the tool agree)."""
    base = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
    new = SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb"

    def keys(path) -> list[str]:  # type: ignore[no-untyped-def]
        out = cli("summarize", str(path), "--format", "json")
        return [f"{f['kind']} {f['target']}" for f in json.loads(out.stdout)["findings"]["items"]]

    kb, kn = keys(base), keys(new)
    out = cli("compare", str(base), str(new), "--format", "json")
    ch = json.loads(out.stdout)["findings"]
    assert [f"{f['kind']} {f['target']}" for f in ch["appeared"]] == [k for k in kn
                                                                        if k not in kb]
    assert [f"{f['kind']} {f['target']}" for f in ch["vanished"]] == [k for k in kb
                                                                        if k not in kn]
    assert ch["vanished"], "the MI300X sample's late GPU5 is no finding of the MI355X sample"
    same = json.loads(cli("compare", str(base), str(base), "--format", "json").stdout)
    assert same["findings"] == {"appeared": [], "vanished": []}


def test_graph_launch_evidence_is_the_idle_breakdowns_launch_idle() -> None:
    """The graph-launch finding's "device idle for launches" is the idle breakdown's host
    launch and launch latency parts summed over the devices (the JSON's own numbers): the
    real A100 NCCL trace, an eager loop whose device waits for its launches. (The SGLang
    trace this test read had its 494 ms hipMemcpyWithStream stall as launch latency: a
    blocking copy, sync since issue 56, tests/test_blocking_calls.py.)"""
    path = TRACES / "kineto" / "a100_nccl_2rank_rank0.json.gz"
    if not path.exists():
        pytest.skip("shared traces are not beside this checkout")
    doc = json.loads(cli("summarize", str(path), "--format", "json").stdout)
    f = next(f for f in doc["findings"]["items"] if f["kind"] == "graph_launch")
    idle = sum(d["timeline"]["idle_breakdown"]["host_launch_ns"]
               + d["timeline"]["idle_breakdown"]["launch_latency_ns"] for d in doc["devices"])
    assert f"device idle for launches: {idle / 1e6:,.3f} ms" in f["evidence"]
    assert idle > 0.9 * f["saved_ns"]  # the saving is idle the breakdown says launches caused


def test_a_collective_of_unknown_type_reads_as_such() -> None:
    from tracelens.analyze.summary.findings import plural
    assert plural("unknown") == "collectives of unknown type"
    assert plural("all-gather") == "all-gathers" and plural("gemm") == "GEMMs"


def _gapped(tmp_path, gap_ns: int):  # type: ignore[no-untyped-def]
    """A device-only step: two GEMMs on one stream of one GPU with a planted gap between
    them that nothing in the trace explains (no host events)."""
    from tracelens_dev.writers.xspace import Activity, build_xspace

    acts = [Activity(0, 1, "Cijk_gemm_a.kd", 1_000_000, 1_000_000, {"hlo_op": "custom-call.1"}),
            Activity(0, 1, "Cijk_gemm_b.kd", 2_000_000 + gap_ns, 1_000_000,
                     {"hlo_op": "custom-call.2"})]
    p = tmp_path / f"gap{gap_ns}.xplane.pb"
    p.write_bytes(build_xspace(acts))
    return summarize(tracelens.load(p))


def test_a_path_mostly_idle_is_a_finding_without_projection(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Planted: 3 ms of gap nothing explains (no host events) between two 1 ms GEMMs, a 5 ms
    window. The second GEMM waited for something the trace does not show, so the path is
    that GEMM and, before it, nothing known: 4 ms idle (80%), the first GEMM included
    (docs/critical-path.md, device-only). The finding names it and says no what-if can move
    it. A 5 µs gap is the stream's own order: the path is both GEMMs, no finding."""
    s = _gapped(tmp_path, 3_000_000)
    assert s.critical_path is not None and s.critical_path.step_ns == 5_000_000
    (f,) = [f for f in s.findings.items if f.kind == "idle"]
    assert f.title == "Find what the device waits for: 80% of the critical path is idle"
    assert f.saved_ns is None and "no what-if can move them" in (f.unprojected or "")
    assert f.evidence.startswith("4.000 of the path's 5.000 ms on host0/GPU0")
    s = _gapped(tmp_path, 5_000)
    assert {c.component: c.ns for c in s.critical_path.composition} == {"gemm": 2_000_000,
                                                                        "idle": 5_000}
    assert not [f for f in s.findings.items if f.kind == "idle"]


def test_the_eager_tpu_loops_gaps_are_host_work() -> None:
    """Real: the eager TPU trace dispatches one jitted module per jnp call. Its host plane's
    launches, syncs and dispatches are read (parsers/xspace/xla_host.py), so the gaps between
    the modules (27% of the path's idle before they were read) are the host's, and projected:
    no idle finding; the first finding is the host's (sync, dispatch or host) with a
    saving."""
    s = summarize(tracelens.load(SAMPLES / "tpu" / "eager_block.xplane.pb"))
    assert not [f for f in s.findings.items if f.kind == "idle"]
    comp = {c.component: c.ns for c in s.critical_path.composition}
    assert comp.get("idle", 0) < 0.01 * s.critical_path.step_ns
    assert comp["host"] > 0.4 * s.critical_path.step_ns
    first = s.findings.items[0]
    assert first.kind in ("sync", "dispatch", "host") and first.saved_ns > 0
    remat = summarize(tracelens.load(SAMPLES / "tpu" / "remat.xplane.pb"))
    assert not [f for f in remat.findings.items if f.kind == "idle"]


def test_no_cuda_or_hip_graph_advice_where_no_gpu_runs_the_work() -> None:
    """A TPU trace whose device waits for launches gets no "Graph-launch the step (CUDA/HIP
    graphs)" finding, projected or not: no such graph launches a TPU program (the real TPU v5e
    training step, 1.3% idle, read that advice among its findings)."""
    from tracelens.api.analysis import TraceAnalysis

    trace = SAMPLES / "tpu" / "memory" / "plain.xplane.pb.gz"
    s = TraceAnalysis(trace).summary
    assert {d.vendor for d in s.devices} == {"google"}
    assert [f.kind for f in s.findings.items if f.kind == "graph_launch"] == []
    assert s.findings.items and s.findings.items[0].kind == "hide"  # the exposed copies first
