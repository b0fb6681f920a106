"""``tracelens hlo`` on a real XLA:CPU trace (``tests/data/jax_recompile``, made by its
``make_jax_recompile.py``): one finding per module and op over its compilations, programs that
never ran in the trace marked and ranked last, and no advice for XLA's own all-reduce
promotion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CPU_TRACE, cli, oracle, real_trace

TRACE = Path(__file__).resolve().parent / "data" / "jax_recompile" / "recompile_bf16.xplane.pb"


def _json(*args: str) -> dict:
    out = cli("hlo", str(TRACE), "--format", "json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_module_compiled_twice_has_its_finding_once():
    """jit_accumulate is compiled for two batch sizes (programs 30 and 32, both with the same
    psum.13 in a 4-iteration loop): one finding, with both compilations, costed from the one
    that ran."""
    rep = _json()
    loops = [f for f in rep["findings"] if f["kind"] == "collective-in-loop"]
    assert [(f["program"], f["instruction"], f["compilations"], f["program_ids"],
             f["executed"]) for f in loops] == [
        ("jit_accumulate(32)", "psum.13", 2, [30, 32], True)]
    assert loops[0]["exposed_ns_per_step"] > 0
    assert rep["findings_total"] == len(rep["findings"])
    # the same instruction of the two compilations is one key: no (module, kind, op) twice
    keys = [(f["program"].split("(")[0], f["kind"], f["instruction"]) for f in rep["findings"]]
    assert len(keys) == len(set(keys))


def test_programs_that_never_ran_are_marked_and_ranked_last():
    rep = _json()
    ran = {p["program_id"]: p["executed"] for p in rep["programs"]}
    assert ran[32] is True and ran[34] is True  # accumulate at batch 32, bf16_step
    assert ran[30] is False  # accumulate at batch 16 ran only before the trace
    assert sum(v is False for v in ran.values()) >= 1
    alone = _json("--program", "30")
    assert [(f["program"], f["executed"], f["exposed_ns_per_step"]) for f in
            alone["findings"]] == [("jit_accumulate(30)", False, None)]
    assert "never ran" in alone["findings"][0]["exposed_note"]
    text = cli("hlo", str(TRACE), "--format", "markdown").stdout
    titles = [line for line in text.splitlines() if line.startswith("## Collectives of")]
    assert titles[-1].startswith("## Collectives of jit_accumulate(30)")
    assert "never ran in this trace" in titles[-1]
    assert all("never ran" not in t for t in titles[:-1])


def test_xla_promotion_of_a_bf16_all_reduce_gets_no_advice():
    """bf16_step all-reduces bf16 as written; XLA:CPU promotes it to f32 (reducer
    region_0.0_promoted): no "communicate in bf16", a note that says what it is."""
    rep = _json()
    assert not [f for f in rep["findings"] if f["program_id"] == 34]
    assert all("communicate in" not in f["message"] for f in rep["findings"])
    bf16 = next(p for p in rep["programs"] if p["program_id"] == 34)
    assert [c["name"] for c in bf16["collectives"]] == ["psum.8"]
    assert any("region_0.0_promoted" in n and "XLA" in n for n in bf16["notes"])


def test_one_compilation_that_ran_is_marked_executed():
    """The CPU data-parallel trace: jit_step ran in every step, the jit__normal programs
    before the trace."""
    rep = json.loads(cli("hlo", str(real_trace(CPU_TRACE)), "--format", "json").stdout)
    ran = {(p["module"], p["program_id"]): p["executed"] for p in rep["programs"]}
    assert ran[("jit_step", 12)] is True
    assert ran[("jit__normal", 4)] is False


@pytest.mark.parametrize("trace, folder", [("mi300x_jax08_attention", "attention08"),
                                           ("mi300x_jax08_conv_8gpu", "conv08")])
def test_executed_programs_are_those_xprof_times(trace: str, folder: str):
    """The programs marked executed are exactly the program ids of XProf's own hlo_stats
    (22 of 31 on the attention trace, 1 of 8 on the convolution trace)."""
    stats = json.loads(oracle(folder, "xprof_hlo_stats.json").read_text())
    cols = [c["id"] for c in stats["cols"]]
    timed = {int(dict(zip(cols, (c["v"] for c in r["c"])))["program_id"])
             for r in stats["rows"]}
    path = real_trace(f"{trace}.xplane.pb")
    rep = json.loads(cli("hlo", str(path), "--format", "json").stdout)
    assert {p["program_id"] for p in rep["programs"] if p["executed"]} == timed
    assert all(p["executed"] is False for p in rep["programs"] if p["program_id"] not in timed)


def test_a_dump_of_two_compilations_has_its_finding_once():
    """The real loop_step dump read as two compilations (program ids 24 and 99): one
    finding, executed unknown (a dump has no timeline)."""
    from dataclasses import replace

    from tracelens.analyze.compute.hlo_findings import lens_dump
    from parsers.hlo.dump import load_dump

    module, schedule = load_dump(TRACE.parents[2].parent / "sample_traces" / "hlo"
                                 / "module_0024.loop_step.after_optimizations.txt")
    res = lens_dump([(module, schedule), (replace(module, program_id=99), schedule)])
    assert [(f.kind, f.instruction, f.program_ids, f.executed) for f in res.findings] == [
        ("collective-in-loop", "psum.13", (24, 99), None)]
    assert [p.executed for p in res.programs] == [None, None]
