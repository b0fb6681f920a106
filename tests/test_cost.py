"""Cost annotation on hand-built traces: the join is by (host, program_id, op), never by module
name; an op's cost sits on its main kernel; counters and parser bytes win; rocprofv3 counters."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.hlo_build import ModuleBuilder
from tracelens.cost.events import annotate, annotate_events, op_cost_table
from tracelens.cost.counters import cost_from_counters
from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, MODULE_SCHEMA, STEP_SCHEMA,
                             HOST_EVENT_SCHEMA, Trace, conform)


def dot_module(program_id: int, m: int, k: int, n: int) -> bytes:
    """A ``jit_dot`` program (the same module name for every shape, as JAX names them)."""
    b = ModuleBuilder("jit_dot", program_id)
    main = b.computation("main.1")
    b.inst(main, "a.1", "parameter", f"bf16[{m},{k}]")
    b.inst(main, "b.1", "parameter", f"bf16[{k},{n}]", parameter_number=1)
    b.inst(main, "dot.1", "dot", f"bf16[{m},{n}]", ("a.1", "b.1"), root=True,
           dot_dimension_numbers=lambda d: (d.lhs_contracting_dimensions.append(1),
                                            d.rhs_contracting_dimensions.append(0)))
    b.entry(main)
    return b.bytes()


def make_trace(rows: list[dict], modules: list[dict]) -> Trace:
    base = {"rank": 0, "device": 0, "stream": 1, "kind": "kernel", "category": "gemm",
            "rule": "test", "module": "jit_dot"}
    events = conform(pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None),
                     EVENT_SCHEMA)
    devices = conform(events.select("host", "rank", "device").unique(), DEVICE_SCHEMA)
    mods = conform(pl.DataFrame(modules, schema_overrides={"hlo_proto": pl.Binary}),
                   MODULE_SCHEMA) if modules else pl.DataFrame(schema=MODULE_SCHEMA)
    return Trace(events=events, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                 steps=pl.DataFrame(schema=STEP_SCHEMA), devices=devices, modules=mods)


def test_join_by_program_id_not_module_name() -> None:
    """Two programs named jit_dot: each kernel gets its own program's shape (TraceLens joins by
    name and reports every GEMM of the MI300X trace as 1024³)."""
    trace = make_trace(
        [dict(host="h0", name="Cijk_A", op="dot.1", program_id=1, start_ns=0, end_ns=10),
         dict(host="h0", name="Cijk_B", op="dot.1", program_id=2, start_ns=20, end_ns=30),
         dict(host="h1", name="Cijk_B", op="dot.1", program_id=2, start_ns=20, end_ns=30)],
        [{"host": "h0", "rank": 0, "program_id": 1, "module": "jit_dot",
          "hlo_proto": dot_module(1, 8192, 4096, 8192)},
         {"host": "h0", "rank": 0, "program_id": 2, "module": "jit_dot",
          "hlo_proto": dot_module(2, 1024, 1024, 1024)}])
    annotate(trace)
    flops = trace.events["flops"].to_list()
    assert flops[:2] == [2.0 * 8192 * 4096 * 8192, 2.0 * 1024 ** 3]
    assert flops[2] is None  # host h1 has no HLO for program 2: no cost, and a warning
    assert any("have no HLO" in w for w in trace.meta.warnings)
    assert trace.events["cost_source"].to_list() == ["hlo", "hlo", None]
    assert trace.events["dtype"].to_list()[:2] == ["bf16", "bf16"]


def test_op_cost_sits_on_the_main_kernel_of_each_execution() -> None:
    """An op launching two kernels per execution (MIOpen Im3d2Col + Tensile GEMM): the kernel
    with the most time carries the op's cost, the helper 0, on every device separately."""
    rows = []
    for dev in (0, 1):
        for i in range(3):
            t = 1000 * i
            rows.append(dict(host="h0", device=dev, name="Im2Col", op="dot.1", program_id=1,
                             start_ns=t, end_ns=t + 10, category="convolution"))
            rows.append(dict(host="h0", device=dev, name="Cijk_X" if dev == 0 else "Cijk_Y",
                             op="dot.1", program_id=1, start_ns=t + 10, end_ns=t + 100,
                             category="convolution"))
    trace = make_trace(rows, [{"host": "h0", "rank": 0, "program_id": 1, "module": "jit_dot",
                               "hlo_proto": dot_module(1, 64, 64, 64)}])
    annotate(trace)
    ev = trace.events
    per = 2.0 * 64 ** 3
    assert ev.filter(pl.col("name").cat.starts_with("Cijk"))["flops"].to_list() == [per] * 6
    helper = ev.filter(pl.col("name") == "Im2Col")
    assert helper["flops"].to_list() == [0.0] * 6 and helper["bytes"].to_list() == [0.0] * 6
    assert ev["flops"].sum() == 6 * per  # every execution counted once


def test_counters_and_parser_bytes_win_over_hlo() -> None:
    trace = make_trace(
        [dict(host="h0", name="Cijk_A", op="dot.1", program_id=1, start_ns=0, end_ns=10,
              flops=5.0, bytes=7.0, dtype="fp8", cost_source="counters"),
         dict(host="h0", name="MemcpyD2D", kind="memcpy", category="memory", op="dot.1",
              program_id=1, start_ns=20, end_ns=30, bytes=4096.0)],
        [{"host": "h0", "rank": 0, "program_id": 1, "module": "jit_dot",
          "hlo_proto": dot_module(1, 8, 8, 8)}])
    annotate(trace)
    r = trace.events.row(0, named=True)
    assert (r["flops"], r["bytes"], r["dtype"], r["cost_source"]) == (5.0, 7.0, "fp8",
                                                                      "counters")
    m = trace.events.row(1, named=True)
    assert (m["flops"], m["bytes"], m["cost_source"]) == (None, 4096.0, None)


def test_damaged_module_is_a_warning_not_a_crash() -> None:
    trace = make_trace([dict(host="h0", name="k", op="dot.1", program_id=1, start_ns=0,
                             end_ns=10)],
                       [{"host": "h0", "rank": 0, "program_id": 1, "module": "jit_dot",
                         "hlo_proto": b"\x0a\xff\xff\xff"}])
    annotate(trace)
    assert trace.events["flops"].to_list() == [None]
    assert any("could not be decoded" in w for w in trace.meta.warnings)


def test_text_dump_fills_programs_the_trace_lacks(tmp_path: Path) -> None:
    dump = tmp_path / "module_0003.jit_dot.sm_90_gpu_after_optimizations.txt"
    dump.write_text("HloModule jit_dot\n\nENTRY %main.1 (a: bf16[32,64], b: bf16[64,16]) -> "
                    "bf16[32,16] {\n  %a = bf16[32,64]{1,0} parameter(0)\n  %b = bf16[64,16]{1,0}"
                    " parameter(1)\n  ROOT %dot.1 = bf16[32,16]{1,0} dot(bf16[32,64]{1,0} %a, "
                    "bf16[64,16]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}"
                    "\n")
    trace = make_trace([dict(host="h0", name="nvjet", op="dot.1", program_id=3, start_ns=0,
                             end_ns=10)], [])
    annotate(trace, hlo_text=[dump])
    assert trace.events["flops"].to_list() == [2.0 * 32 * 16 * 64]


def test_cost_table_is_one_row_per_distinct_op() -> None:
    rows = [dict(host="h0", name="k", op="dot.1", program_id=1, start_ns=i, end_ns=i + 1)
            for i in range(0, 1000, 2)]
    trace = make_trace(rows, [{"host": "h0", "rank": 0, "program_id": 1, "module": "jit_dot",
                               "hlo_proto": dot_module(1, 8, 8, 8)}])
    table, problems = op_cost_table(trace.events, trace.modules)
    assert table.height == 1 and problems == []
    out = annotate_events(trace.events, table)
    assert out.columns == trace.events.columns and out.height == 500
    assert out["start_ns"].to_list() == trace.events["start_ns"].to_list()


def test_hosts_read_one_after_another_share_costs_not_mixing_programs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Host files read one after another (the engine's map) share each decoded module and
    its instructions' costs: the second host costs nothing again, and a program of another
    shape with the same module and op names keeps its own cost."""
    import tracelens.cost.opcost as opcost

    calls: list[str] = []
    real = opcost.instruction_cost

    def counting(module, comp, inst):  # type: ignore[no-untyped-def]
        calls.append(f"{module.program_id}/{inst.name}")
        return real(module, comp, inst)

    monkeypatch.setattr(opcost, "instruction_cost", counting)
    protos = {1: dot_module(1, 48, 40, 24), 2: dot_module(2, 8, 8, 8)}

    def host(name: str, pid: int) -> list[float | None]:
        trace = make_trace([dict(host=name, name="k", op="dot.1", program_id=pid, start_ns=0,
                                 end_ns=1)], [{"host": name, "rank": 0, "program_id": pid,
                                               "module": "jit_dot", "hlo_proto": protos[pid]}])
        table, problems = op_cost_table(trace.events, trace.modules)
        assert problems == []
        return table["_flops"].to_list()

    assert host("a", 1) == host("b", 1) == [2.0 * 48 * 40 * 24]
    assert host("c", 2) == [2.0 * 8 * 8 * 8]
    assert calls == ["1/dot.1", "2/dot.1"]


# --- rocprofv3 counters ---------------------------------------------------------------------

def test_cost_from_counters_formulas() -> None:
    df = pl.DataFrame({
        "kernel_id": [1, 2, 3, 4],
        "SQ_INSTS_VALU_MFMA_MOPS_BF16": [1000, None, 0, None],
        "sq_insts_valu_mfma_mops_f8": [10, None, 0, None],  # names are case-insensitive
        "SQ_INSTS_VALU_FMA_F32": [5, None, None, 100],
        "SQ_INSTS_VALU_ADD_F32": [None, None, None, 10],
        "TCC_EA0_RDREQ": [100, 50, None, None], "TCC_EA0_RDREQ_32B": [10, 0, 1, None],
        "TCC_EA0_WRREQ": [40, 0, 1, None], "TCC_EA0_WRREQ_64B": [20, 0, 1, None],
        "TCC_BUBBLE_sum": [5, 0, 1, None],  # rocprof-compute's _sum spelling
    })
    out = cost_from_counters(df)
    assert out["kernel_id"].to_list() == [1, 2, 3, 4]
    # 512 per MFMA op unit; 64 lanes × 2 per FMA; 64 per ADD
    assert out["flops"].to_list() == [512 * 1000 + 512 * 10 + 64 * 2 * 5, None, 0.0,
                                      64 * 2 * 100 + 64 * 10]
    # 128·BUBBLE + 32·RD32 + 64·(RD − BUBBLE − RD32) + 32·(WR − WR64) + 64·WR64
    assert out["bytes"].to_list() == [128 * 5 + 32 * 10 + 64 * 85 + 32 * 20 + 64 * 20,
                                      64 * 50, None, None]
    assert out["dtype"].to_list() == ["bf16", None, None, "fp32"]
    assert out["cost_source"].to_list() == ["counters"] * 4


def test_cost_from_counters_mi200_and_no_counters() -> None:
    df = pl.DataFrame({"TCC_EA_RDREQ": [10], "TCC_EA_RDREQ_32B": [2], "TCC_EA_WRREQ": [6],
                       "TCC_EA_WRREQ_64B": [4], "SQ_INSTS_VALU_MFMA_MOPS_F64": [1]})
    out = cost_from_counters(df)
    assert out["bytes"][0] == 32 * 2 + 64 * 8 + 64 * 4 + 32 * 2
    assert out["flops"][0] == 512.0 and out["dtype"][0] == "fp64"
    bare = cost_from_counters(pl.DataFrame({"name": ["k"]}))
    assert bare.select("flops", "bytes", "dtype", "cost_source").row(0) == (None, None, None,
                                                                             None)


@pytest.mark.parametrize("missing", ["TCC_BUBBLE", "TCC_EA0_WRREQ_64B"])
def test_incomplete_hbm_counter_set_gives_no_bytes(missing: str) -> None:
    cols = {c: [1] for c in ("TCC_EA0_RDREQ", "TCC_EA0_RDREQ_32B", "TCC_EA0_WRREQ",
                             "TCC_EA0_WRREQ_64B", "TCC_BUBBLE") if c != missing}
    assert cost_from_counters(pl.DataFrame(cols))["bytes"][0] is None


def test_cost_note_says_why_a_compute_kernel_has_no_flops() -> None:
    """Every compute kernel without FLOPs gets the reason; memory and collectives get none;
    ``no_cost_data`` counts compute kernels without FLOPs even when their bytes are known."""
    from tracelens.analyze.compute.roofline import no_cost_data
    trace = make_trace(
        [dict(host="h0", name="k_noop", category="elementwise", start_ns=0, end_ns=10),
         dict(host="h0", name="blit", category="memory", start_ns=10, end_ns=20),
         dict(host="h0", name="k_missing", op="dot.9", program_id=1, start_ns=20, end_ns=30),
         dict(host="h0", name="k_nohlo", op="dot.1", program_id=2, start_ns=30, end_ns=40),
         dict(host="h0", name="k_ok", op="dot.1", program_id=1, start_ns=40, end_ns=50),
         dict(host="h0", name="k_bytes", category="elementwise", start_ns=50, end_ns=60,
              bytes=64.0, cost_source="counters"),
         dict(host="h0", name="nccl", category="collective", start_ns=60, end_ns=70)],
        [{"host": "h0", "rank": 0, "program_id": 1, "module": "jit_dot",
          "hlo_proto": dot_module(1, 8, 8, 8)}])
    annotate(trace)
    notes = dict(zip(trace.events["name"], trace.events["cost_note"]))
    assert notes == {
        "k_noop": "the kernel names no HLO op", "blit": None,
        "k_missing": "op 'dot.9' is not in the HLO of program 1",
        "k_nohlo": "the trace has no HLO for program 2 on this host", "k_ok": None,
        "k_bytes": "the hardware counters of this dispatch hold no FLOP counter",
        "nccl": None}
    counted = trace.events.filter(no_cost_data())["name"].to_list()
    # (and, as before, any kernel without any cost: the blit and the untyped collective)
    assert counted == ["k_noop", "blit", "k_missing", "k_nohlo", "k_bytes", "nccl"]


def test_kept_costs_go_with_their_module() -> None:
    """The per-process op costs keep no module alive: a module's entry goes when it does."""
    import gc

    from tracelens.cost import events
    from tracelens.core.hlo_model import Module

    module = Module("jit_f", 99, "main")
    costs = events._costs_of(module)
    assert events._costs_of(module) is costs and id(module) in events._COSTS
    key = id(module)
    del module
    gc.collect()
    assert key not in events._COSTS
