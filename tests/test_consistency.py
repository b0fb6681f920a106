"""The consistency gate (tracelens/analyze/consistency.py, docs/critical-path.md "The consistency
gate"): one planted contradiction of each kind is caught (and its bound is exact: the same
explanation at the bound passes), and on every bundled sample and real trace in ../shared the
gate finds exactly the contradictions recorded below (a new one fails this test)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl
import pytest

from tracelens.analyze.consistency import (ARRIVAL_FACTS, DEVICE_FACTS, EXPOSED_FACTS,
                                           WindowFacts, check_findings, check_paths)
from tracelens.results.critical_path import (Component, CriticalPathResult, DevicePath,
                                             WhatIf, Window)
from tracelens.results.findings import Findings, RankedFinding

ROOT = Path(__file__).resolve().parents[1]
MS = 1_000_000


def _device(host: str, device: int, idle: int, span: int = 10 * MS, **kw: int) -> dict:
    row = {k: 0 for k in DEVICE_FACTS}
    row.update(host=host, rank=0, device=device, step=1, start_ns=0, end_ns=span,
               span_ns=span, busy_ns=span - idle, idle_ns=idle)
    row.update(kw)
    return row


def _facts(devices: list[dict], exposed: list[dict] | None = None,
           arrivals: list[dict] | None = None) -> WindowFacts:
    return WindowFacts(pl.DataFrame(devices, schema=DEVICE_FACTS),
                       pl.DataFrame(exposed or [], schema=EXPOSED_FACTS),
                       pl.DataFrame(arrivals or [], schema=ARRIVAL_FACTS))


def _path(comps: dict[str, int], host: str = "h", device: int = 0) -> DevicePath:
    total = sum(comps.values())
    return DevicePath(0, host, device, 1, Window(0, total), total, "device-only",
                      tuple(Component(k, v) for k, v in comps.items()), ())


def _result(path: DevicePath, *what_if: WhatIf) -> CriticalPathResult:
    return CriticalPathResult((path,), what_if)


def _checks(res: CriticalPathResult, facts: WindowFacts) -> list[tuple[str, str, int, int]]:
    return [(v.check, v.subject, v.claimed_ns, v.bound_ns)
            for v in check_paths(res, facts).violations]


def test_idle_on_a_path_beyond_its_devices_idle_is_caught() -> None:
    """9 ms of the path idle on a device idle 1 ms (a nested op's body read as gaps): caught;
    1 ms (the device's own idle) passes."""
    facts = _facts([_device("h", 0, idle=1 * MS)])
    bad = _path({"gemm": 1 * MS, "idle": 9 * MS})
    assert _checks(_result(bad), facts) == [("path_idle", "path h/GPU0", 9 * MS, 1 * MS)]
    assert _checks(_result(_path({"gemm": 9 * MS, "idle": 1 * MS})), facts) == []


def test_idle_bound_counts_the_devices_the_path_waits_for() -> None:
    """Below a wait the path is in the late device's history: its idle counts too."""
    facts = _facts([_device("h", 0, idle=1 * MS), _device("h", 1, idle=5 * MS)])
    path = _path({"wait:h/GPU1": 2 * MS, "idle": 6 * MS, "gemm": 2 * MS})
    assert _checks(_result(path), facts) == []
    path = _path({"wait:h/GPU1": 1 * MS, "idle": 7 * MS, "gemm": 2 * MS})
    assert _checks(_result(path), facts) == [("path_idle", "path h/GPU0", 7 * MS, 6 * MS)]


def test_host_on_a_path_beyond_the_devices_idle_is_caught() -> None:
    """A device 94% busy cannot wait for its host 100% of the step (speeding the host up
    leaves the device's 94%)."""
    facts = _facts([_device("h", 0, idle=int(0.6 * MS))])
    path = _path({"host": 10 * MS})
    assert _checks(_result(path), facts) == [("path_host", "path h/GPU0", 10 * MS,
                                               int(0.6 * MS))]
    assert _checks(_result(_path({"host": int(0.6 * MS), "gemm": int(9.4 * MS)})),
                   facts) == []


def test_hide_saving_beyond_the_types_exposed_time_is_caught() -> None:
    facts = _facts([_device("h", 0, idle=0)],
                   exposed=[{"host": "h", "rank": 0, "device": 0, "type": "all-gather",
                             "exposed_ns": 2 * MS},
                            {"host": "h", "rank": 0, "device": 1, "type": "all-gather",
                             "exposed_ns": 5 * MS}])  # another device: not on the path
    path = _path({"gemm": 7 * MS, "communication": 3 * MS})
    over = WhatIf("hide", "all-gather", 10 * MS, 7 * MS, 3 * MS, 3 * MS)
    at = WhatIf("hide", "all-gather", 10 * MS, 8 * MS, 2 * MS, 3 * MS)
    assert _checks(_result(path, over), facts) == [("hide", "hide all-gather", 3 * MS,
                                                    2 * MS)]
    assert _checks(_result(path, at), facts) == []
    other = WhatIf("hide", "all-reduce", 10 * MS, 9 * MS, 1 * MS, 1 * MS)  # none exposed
    assert _checks(_result(path, other), facts) == [("hide", "hide all-reduce", 1 * MS, 0)]


def test_hide_memory_is_bounded_by_the_exposed_memory_time() -> None:
    """``hide memory`` (the path's copies in no time) saves at most the memory time no compute
    hid on the path's devices; it is no collective type (read as one, its bound was 0)."""
    facts = _facts([_device("h", 0, idle=0, exposed_memory_ns=2 * MS)])
    path = _path({"gemm": 7 * MS, "memory": 3 * MS})
    over = WhatIf("hide", "memory", 10 * MS, 7 * MS, 3 * MS, 3 * MS)
    at = WhatIf("hide", "memory", 10 * MS, 8 * MS, 2 * MS, 3 * MS)
    assert _checks(_result(path, over), facts) == [("hide", "hide memory", 3 * MS, 2 * MS)]
    assert _checks(_result(path, at), facts) == []


def test_graph_launch_beyond_launch_waits_and_on_graph_replays_is_caught() -> None:
    path = _path({"host": 1 * MS, "gemm": 9 * MS})
    g = WhatIf("graph_launch", "host launches", 10 * MS, 8 * MS, 2 * MS, 1 * MS)
    # waited 1.5 ms for launches (host launch + launch latency): 2 ms is more
    facts = _facts([_device("h", 0, idle=2 * MS, host_launch_ns=1 * MS,
                            launch_latency_ns=MS // 2, sync_wait_ns=MS // 2,
                            launched_ns=8 * MS)])
    assert _checks(_result(path, g), facts) == [("graph_launch", "graph_launch host launches",
                                                 2 * MS, 1500 * 1000)]
    ok = _facts([_device("h", 0, idle=2 * MS, host_launch_ns=2 * MS, launched_ns=8 * MS)])
    assert _checks(_result(path, g), ok) == []
    # the same waits, but the device's work was launched by graph replays: nothing to replace
    replayed = _facts([_device("h", 0, idle=2 * MS, host_launch_ns=2 * MS,
                               launched_ns=8 * MS, graph_ns=7 * MS)])
    assert _checks(_result(path, g), replayed) == [
        ("graph_launch", "graph_launch host launches", 2 * MS, 0)]


def _arrive(device: int, key: str, start: int) -> dict:
    return {"host": "h", "rank": 0, "device": device, "instance": key, "occurrence": 0,
            "start_ns": start, "end_ns": start + MS}


def test_on_time_beyond_the_others_waiting_is_caught() -> None:
    """h/GPU1 arrives last at one all-reduce, 2 ms after the first: on time saving 3 ms is
    more than anyone waited for it."""
    facts = _facts([_device("h", 0, idle=0), _device("h", 1, idle=0)],
                   arrivals=[_arrive(0, "m/ar", 1 * MS), _arrive(1, "m/ar", 3 * MS),
                             _arrive(0, "m/ag", 5 * MS), _arrive(1, "m/ag", 5 * MS)])
    path = _path({"gemm": 5 * MS, "wait:h/GPU1": 2 * MS, "communication": 3 * MS})
    over = WhatIf("on_time", "h/GPU1", 10 * MS, 7 * MS, 3 * MS, 2 * MS)
    at = WhatIf("on_time", "h/GPU1", 10 * MS, 8 * MS, 2 * MS, 2 * MS)
    assert _checks(_result(path, over), facts) == [("on_time", "on_time h/GPU1", 3 * MS,
                                                    2 * MS)]
    assert _checks(_result(path, at), facts) == []


@dataclass
class _Head:
    median_step_ns: int | None


@dataclass
class _Summary:
    """What the findings' checks read of a summary."""

    headline: _Head

    def device_name(self, host: str, device: int) -> str:
        return f"{host}/GPU{device}"


def _finding() -> RankedFinding:
    return RankedFinding("hide", "all-reduce", "Overlap", 1 * MS, 10.0, "", "")


def test_nothing_to_fix_beside_a_measured_exposure_is_caught() -> None:
    """No findings, while a device's exposed memory is 30% of its window: caught; at 10%
    (not over) nothing is said."""
    s = _Summary(_Head(10 * MS))
    none = Findings((), 1, 10 * MS, 1.0)
    facts = _facts([_device("h", 0, idle=0, exposed_memory_ns=3 * MS)])
    got = check_findings(s, none, facts).violations  # type: ignore[arg-type]
    assert [(v.check, v.claimed_ns, v.bound_ns) for v in got] == [("nothing_to_fix", 0,
                                                                    3 * MS)]
    assert "exposed memory" in got[0].fact
    quiet = _facts([_device("h", 0, idle=1 * MS)])
    assert check_findings(s, none, quiet).violations == ()  # type: ignore[arg-type]
    # a finding listed: no "nothing to fix" to contradict
    some = replace(none, items=(_finding(),))
    assert check_findings(s, some, facts).violations == ()  # type: ignore[arg-type]
    # a straggler the others waited 2 ms for in a 10 ms window is one too
    late = _facts([_device("h", 0, idle=0), _device("h", 1, idle=0)],
                  arrivals=[_arrive(0, "m/ar", 1 * MS), _arrive(1, "m/ar", 3 * MS)])
    got = check_findings(s, none, late).violations  # type: ignore[arg-type]
    assert [(v.check, v.bound_ns) for v in got] == [("nothing_to_fix", 2 * MS)]


def test_findings_on_another_step_than_the_headlines_are_caught() -> None:
    s = _Summary(_Head(26 * MS))
    f = Findings((_finding(),), 2, 4 * MS, 1.0)
    got = check_findings(s, f, _facts([_device("h", 0, idle=0)])).violations  # type: ignore
    assert [(v.check, v.claimed_ns, v.bound_ns) for v in got] == [("step", 4 * MS, 26 * MS)]
    same = Findings((_finding(),), 2, 26 * MS, 1.0)
    assert check_findings(_Summary(_Head(26 * MS)), same,  # type: ignore[arg-type]
                          _facts([_device("h", 0, idle=0)])).violations == ()


MULTI = ROOT / "sample_traces" / "tpu" / "multi.xplane.pb"


def _mi350x() -> Path:
    """The real rocprofv3 MI350X trace (skipped without ../shared): its path is 99% idle on
    a device idle 72% of the window, so its idle finding is contradicted."""
    from tests.conftest import real_rocprof

    return real_rocprof("mi350x_908_results.json.gz")


def test_summarize_marks_the_contradicted_finding_and_says_why() -> None:
    """A path 14,994 ms idle on a device idle 10,889 ms of the window: the JSON's
    ``consistency`` names the fact, the idle finding carries it (``inconsistent``), and stderr
    says it beside the table (as summarize's warnings: the JSON holds them in its own
    fields)."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    trace = _mi350x()
    out = CliRunner().invoke(main, ["summarize", str(trace), "--format", "json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    got = [(v["check"], v["subject"], v["claimed_ns"], v["bound_ns"])
           for v in d["consistency"]["violations"]]
    gpu = "smci350-zts-gtu-c6-25/GPU0"
    assert got == [("path_idle", f"path {gpu}", 14994342414, 10888911160)]
    assert d["consistency"]["checks"] == ["path_idle", "path_host", "hide", "graph_launch",
                                          "on_time", "nothing_to_fix", "step"]
    idle = next(f for f in d["findings"]["items"] if f["kind"] == "idle")
    assert f"{gpu} was idle 10,888.911 ms" in idle["inconsistent"]
    assert "inconsistent" not in out.stderr
    brief = CliRunner().invoke(main, ["summarize", str(trace)])
    assert f"warning: inconsistent: path {gpu} (path_idle)" in brief.stderr
    assert "[inconsistent] Find what the device waits for" in brief.stdout
    table = CliRunner().invoke(main, ["critical-path", str(trace)])
    assert table.exit_code == 0 and "[inconsistent]" in table.stdout
    assert f"warning: inconsistent: path {gpu} (path_idle)" in table.stderr


def test_the_report_marks_the_contradicted_finding(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    out = CliRunner().invoke(main, ["report", str(_mi350x()), "-o", str(tmp_path / "r.html"),
                                    "--quiet"])
    assert out.exit_code == 0, out.output
    html = (tmp_path / "r.html").read_text()
    assert "<em>[inconsistent]</em> <strong>Find what the device waits for" in html
    assert "contradicted by a measured fact: 14,994.342 ms of the path is idle" in html
    assert "Contradicted by the step's measured facts (1)" in html


# The contradictions the gate finds today, per trace: (command, check, subject). Figures (ns,
# claimed > bound) in docs/critical-path.md, "The consistency gate". Root causes are being
# fixed (issue 56, items 1, 4, 5): remove a row when its cause is; never add one to pass.
_PATHS = {f"path vm/CPU{d}" for d in range(8)}
KNOWN: dict[str, set[tuple[str, str]]] = {
    "sample_traces/h100_8gpu_moe_ddp.xplane.pb": set(),
    "sample_traces/mi300x_8gpu_llama_step.xplane.pb": set(),
    "sample_traces/mi355x_8gpu_llama_fsdp.xplane.pb": set(),
    "sample_traces/mi355x_2x8gpu_straggler": set(),
    "sample_traces/hlo/planted.xplane.pb": set(),
    "sample_traces/hlo/comm_types.xplane.pb": set(),
    # the host's op-by-op dispatch on the path while the device runs the ops it dispatched
    # (the XLA host plane read): 4.007 ms of host against 1.521 ms of device idle
    "sample_traces/tpu/eager_block.xplane.pb": {("path_host", "path runsc/TPU0")},
    "sample_traces/tpu/flash.xplane.pb": set(),
    "sample_traces/tpu/multi.xplane.pb": set(),
    "sample_traces/tpu/remat.xplane.pb": set(),
    "sample_traces/tpu/sync.xplane.pb": set(),
    "shared/xprof/mi300x_jax08_gemm.xplane.pb": {("path_host", "path tw003/GPU0")},
    "shared/xprof/mi300x_jax08_attention.xplane.pb": {("path_host", "path tw003/GPU0")},
    # the headline's step (26.163 ms) is the host-bound one: every path host, 0.8 ms of it
    # device work
    "shared/xprof/mi300x_jax08_conv_8gpu.xplane.pb": {
        ("path_host", "path tw003/GPU0"), ("path_host", "path tw003/GPU2"),
        ("path_host", "path tw003/GPU5")},
    "shared/xprof/cpu_4dev_dp_allreduce.xplane.pb": set(),
    "shared/rocprof/mi350x_908_results.json.gz": {
        ("path_idle", "path smci350-zts-gtu-c6-25/GPU0")},
    "shared/kineto/mi250_rocm62_minitoy_train.json.gz": {
        ("path_host", "path mi250_rocm62_minitoy_train/GPU2")},
    "shared/kineto/a100_nccl_2rank_rank0.json.gz": {("path_host", "path rank0/GPU0")},
    "shared/kineto/sampled_128rank_job": {("path_host", "path rank0/GPU0"),
                                          ("path_host", "path rank1/GPU1")},
    "shared/kineto/mi300x_inference/sglang_qwen3_8b_decode.json.gz": {
        ("path_host", "path rank0/GPU9")},
    "shared/kineto/mi300x_inference/sglang_qwen3_8b_prefilldecode.json.gz": set(),
    "shared/kineto/mi300x_inference/vllm_decode_full_graph.json.gz": set(),
    "shared/kineto/mi300x_inference/vllm_prefilldecode_piecewise_graph.json.gz": set(),
    # graph replays get no graph advice now, and nothing else explains the 25.2 ms the
    # device waits: "nothing to fix" beside that idle is a real gap of the findings
    "shared/kineto/mi300x_inference/xdit_flux1_aiter_sage_rank0.json.gz": {
        ("path_host", "path rank0/GPU2"), ("nothing_to_fix", "findings")},
    "shared/kineto/mi300x_inference/normalization_layers_2gpu.json.gz": {
        ("path_host", "path normalization_layers_2gpu/GPU2")},
    # two processes of one unnamed host, each with a GPU0: the subjects say the rank
    "shared/rocprof/counters_gfx1151": {("path_idle", "path unknown/GPU0 rank 0"),
                                        ("path_idle", "path unknown/GPU0 rank 1")},
    "shared/rocprof/docs_snippets": {("path_idle", "path unknown/GPU0")},
}
"""The contradictions of ``summarize``; ``critical-path`` finds the same but for the findings'
checks (``step``, ``nothing_to_fix``: it lists no findings)."""


def _corpus() -> list[tuple[str, Path]]:
    from tests.consistency_corpus import corpus

    return corpus()


@pytest.mark.parametrize("name,path", _corpus(), ids=[n for n, _ in _corpus()])
def test_the_gate_finds_exactly_the_known_contradictions(name: str, path: Path) -> None:
    from tests.consistency_corpus import contradictions

    rows, words = contradictions(path)
    summarize = {(c, s) for cmd, c, s, _, _ in rows if cmd == "summarize"}
    critical = {(c, s) for cmd, c, s, _, _ in rows if cmd == "critical-path"}
    assert summarize == KNOWN[name], "\n".join(words)
    assert critical == {(c, s) for c, s in KNOWN[name] if s != "findings"}, "\n".join(words)
    for _, _, _, claimed, bound in rows:  # every violation says more than the facts allow
        assert claimed != bound


@pytest.mark.parametrize("path", [MULTI, ROOT / "sample_traces" / "mi355x_2x8gpu_straggler"],
                         ids=["tpu-multi", "straggler-2-hosts"])
def test_the_facts_are_the_summarys_step_timelines(path: Path) -> None:
    """The gate's facts of a window are the timeline and idle breakdown ``summarize`` shows
    for that step, device by device (the same measurement, not a second one)."""
    import tracelens
    from tracelens.api.analysis import TraceAnalysis
    from tracelens.analyze.consistency import window_facts
    from tracelens.analyze.critical.graph import WindowChoice

    trace = tracelens.load(str(path))
    s = TraceAnalysis(trace).summarize()
    facts = window_facts(trace, WindowChoice(None))
    assert facts.devices.height == len(s.devices)
    for r in facts.devices.iter_rows(named=True):
        d = next(d for d in s.devices if (d.host, d.rank, d.device) == (r["host"], r["rank"],
                                                                          r["device"]))
        tl = next(x.timeline for x in d.steps if x.step == r["step"] == s.findings.step)
        b = tl.idle_breakdown
        assert b is not None
        assert (r["span_ns"], r["busy_ns"], r["idle_ns"], r["exposed_comm_ns"],
                r["exposed_memory_ns"], r["host_launch_ns"], r["launch_latency_ns"],
                r["sync_wait_ns"], r["no_host_data_ns"]) == (
            tl.span_ns, tl.busy_ns, tl.idle_ns, tl.exposed_comm_ns, tl.exposed_memory_ns,
            b.host_launch_ns, b.launch_latency_ns, b.sync_wait_ns, b.no_host_data_ns)


def test_a_contradicted_nothing_to_fix_is_said_with_its_fact() -> None:
    from reports.summary_brief import finding_lines

    none = Findings((), 1, 10 * MS, 1.0)
    plain = finding_lines(none)[0][0]
    assert plain.startswith("   nothing found to fix") and "inconsistent" not in plain
    marked = finding_lines(none, against="h/GPU0 exposed memory is 3.000 of its 10.000 ms")[0][0]
    assert marked.endswith("[inconsistent: h/GPU0 exposed memory is 3.000 of its 10.000 ms]")


def test_a_visited_device_counts_the_path_window_outside_its_own_as_idle() -> None:
    """Device-only ranks of one job each have their own window (first to last activity): the
    late rank's starts 5 µs after the path's, and those 5 µs before it began may be idle on
    the path waiting for it (a synthetic two-host job of tests/test_critical_path.py)."""
    us = 1_000
    own = _device("h0", 0, idle=0, span=50 * us)
    late = _device("h1", 0, idle=0, span=50 * us)
    late.update(start_ns=5 * us, end_ns=55 * us)
    path = _path({"idle": 5 * us, "wait:h1/GPU0": 35 * us, "gemm": 10 * us}, host="h0")
    assert _checks(_result(path), _facts([own, late])) == []
    path = _path({"idle": 6 * us, "wait:h1/GPU0": 34 * us, "gemm": 10 * us}, host="h0")
    assert _checks(_result(path), _facts([own, late])) == [
        ("path_idle", "path h0/GPU0", 6 * us, 5 * us)]


def test_waits_that_began_before_the_window_count_inside_it() -> None:
    """h/GPU0 arrived 2 ms before the window (its all-reduce started there and waited), h/GPU1
    3 ms into it: the others waited 3 ms for h/GPU1 inside the window."""
    start = 2 * MS
    dev0, dev1 = _device("h", 0, idle=0), _device("h", 1, idle=0)
    for d in (dev0, dev1):
        d.update(start_ns=start, end_ns=start + 10 * MS)
    arr = [{"host": "h", "rank": 0, "device": 0, "instance": "m/ar", "occurrence": 0,
            "start_ns": 0, "end_ns": 6 * MS},
           {"host": "h", "rank": 0, "device": 1, "instance": "m/ar", "occurrence": 0,
            "start_ns": 5 * MS, "end_ns": 6 * MS}]
    path = _path({"wait:h/GPU1": 3 * MS, "gemm": 7 * MS})
    at = WhatIf("on_time", "h/GPU1", 10 * MS, 7 * MS, 3 * MS, 3 * MS)
    over = WhatIf("on_time", "h/GPU1", 10 * MS, 6 * MS, 4 * MS, 3 * MS)
    facts = _facts([dev0, dev1], arrivals=arr)
    assert _checks(_result(path, at), facts) == []
    assert _checks(_result(path, over), facts) == [("on_time", "on_time h/GPU1", 4 * MS,
                                                    3 * MS)]


def test_a_what_ifs_bound_counts_every_device_of_the_step_paths_activities() -> None:
    """A pipeline's path crosses from stage to stage at transfers, with no wait to name the
    next stage: its activities do. Hiding the send-recvs saves what both stages exposed (the
    simulator's pipeline scenarios: its own re-simulation saves more than the first stage's
    exposure)."""
    from tracelens.results.critical_path import PathActivity

    def act(device: int) -> PathActivity:
        return PathActivity("kernel", "k", "gemm", "h", device, 0, 0, MS, MS)

    facts = _facts([_device("h", 0, idle=0), _device("h", 1, idle=0)],
                   exposed=[{"host": "h", "rank": 0, "device": d, "type": "send-recv",
                             "exposed_ns": 1 * MS} for d in (0, 1)])
    path = replace(_path({"gemm": 7 * MS, "communication": 3 * MS}),
                   activities=(act(0), act(1)))
    w = WhatIf("hide", "send-recv", 10 * MS, 8 * MS, 2 * MS, 3 * MS)
    assert _checks(_result(path, w), facts) == []
    alone = replace(path, activities=(act(0),))
    assert _checks(_result(alone, w), facts) == [("hide", "hide send-recv", 2 * MS, 1 * MS)]


def test_two_ranks_devices_of_one_name_are_checked_each_against_its_own() -> None:
    """Two processes of one machine whose trace names no host, each with a GPU0 (the shared
    rocprof counters trace): each path against its own rank's facts, labelled with it."""
    r0, r1 = _device("unknown", 0, idle=1 * MS), _device("unknown", 0, idle=9 * MS)
    r1["rank"] = 1
    p0 = _path({"idle": 2 * MS, "gemm": 8 * MS}, host="unknown")
    p1 = replace(_path({"idle": 2 * MS, "gemm": 8 * MS}, host="unknown"), rank=1)
    res = CriticalPathResult((p0, p1), ())
    assert _checks(res, _facts([r0, r1])) == [("path_idle", "path unknown/GPU0 rank 0",
                                               2 * MS, 1 * MS)]
