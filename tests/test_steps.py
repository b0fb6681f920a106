"""Where steps come from (tracelens.loading.steps): annotations, --step-marker, or the executions of
the heaviest program that runs at least twice; and ``steps_source`` in every output."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import tracelens
from parsers import xspace as xspace_reader
from tracelens_dev.writers.xspace import Activity, build_xspace
from tests.conftest import CPU_TRACE, GPU_TRACES, SAMPLES, real_trace
from tracelens.cli.commands import main


def kernel(dev: int, stream: int, name: str, start: int, dur: int, op: str, prog: int,
           module: str) -> Activity:
    return Activity(dev, stream, name, start, dur,
                    {"hlo_op": op, "hlo_module": module, "program_id": prog})


def train_job(missing_first_on_gpu1: bool = False) -> list[Activity]:
    """Two GPUs. ``jit_train(7)`` runs 3 times (at 0, 1000, 2000 on GPU 0; 10 ns later on
    GPU 1); its first op launches two kernels, and its third execution's first kernel is on
    another stream. ``jit_eval(8)`` runs twice between them (less device time);
    ``jit_init(9)`` has the most device time but runs once; a memcpy has no program."""
    acts = []
    for dev in (0, 1):
        for k, t in enumerate((0, 1000, 2000)):
            if missing_first_on_gpu1 and dev == 1 and k == 0:
                continue
            t += 10 * dev
            s = 3 if k == 2 else 1
            acts += [kernel(dev, s, "Im2Col.kd", t, 40, "conv.1", 7, "jit_train"),
                     kernel(dev, s, "Cijk_conv", t + 50, 60, "conv.1", 7, "jit_train"),
                     kernel(dev, 2, "Cijk_gemm", t + 150, 300, "custom-call.2", 7, "jit_train")]
        for t in (600, 1600):
            acts.append(kernel(dev, 1, "loop_eval.kd", t + 10 * dev, 250, "fusion.3", 8,
                               "jit_eval"))
        acts.append(kernel(dev, 1, "loop_init.kd", 3000, 5000, "fusion.9", 9, "jit_init"))
        acts.append(Activity(dev, 4, "MemcpyH2D", 2900, 20, {}, "Stream #4(MemcpyH2D)"))
    return acts


def write(tmp_path: Path, acts: list[Activity], name: str = "job.xplane.pb",
          **kwargs: object) -> Path:
    path = tmp_path / name
    path.write_bytes(build_xspace(acts, **kwargs))  # type: ignore[arg-type]
    return path


def windows(trace: tracelens.Trace) -> list[tuple[int, int, int, int, str]]:
    return [tuple(r) for r in trace.steps.sort("rank", "step").select(  # type: ignore
        "rank", "step", "start_ns", "end_ns", "source").iter_rows()]


def test_derived_steps_are_the_heaviest_program_that_runs_twice(tmp_path: Path) -> None:
    trace = tracelens.load(write(tmp_path, train_job()))
    assert trace.meta.steps_source == "program:jit_train(7)"
    # step k starts at the earliest k-th Im2Col of conv.1 over both GPUs; the last ends at
    # jit_train's last kernel (GPU 1: 2010 + 150 + 300)
    assert windows(trace) == [(0, 0, 0, 1000, "program"), (0, 1, 1000, 2000, "program"),
                              (0, 2, 2000, 2460, "program")]
    ev = trace.events
    assert ev.filter(pl.col("name") == "loop_eval.kd")["step"].to_list() == [0, 1, 0, 1]
    assert ev.filter(pl.col("name") == "loop_init.kd")["step"].null_count() == 2
    summary = tracelens.summarize(trace)
    assert summary["steps_source"] == "program:jit_train(7)"
    assert summary["headline"]["steps"] == 3


def test_devices_that_disagree_on_executions_give_no_steps(tmp_path: Path) -> None:
    trace = tracelens.load(write(tmp_path, train_job(missing_first_on_gpu1=True)))
    assert trace.meta.steps_source == "none" and trace.steps.is_empty()
    assert any("jit_train(7), runs a different number of times on its devices (device 0: 3, "
               "device 1: 2)" in w for w in trace.meta.warnings)
    assert trace.events["step"].null_count() == trace.events.height


def test_no_program_runs_twice_means_no_steps(tmp_path: Path) -> None:
    acts = [kernel(0, 1, "a.kd", 0, 10, "f.1", 1, "jit_a"), kernel(0, 1, "b.kd", 20, 10, "f.1",
                                                                     2, "jit_b")]
    trace = tracelens.load(write(tmp_path, acts))
    assert trace.meta.steps_source == "none" and trace.steps.is_empty()
    assert tracelens.summarize(trace)["steps_source"] == "none"


def test_steps_are_derived_per_host(tmp_path: Path) -> None:
    run = tmp_path / "plugins" / "profile" / "2026_01_01"
    run.mkdir(parents=True)
    for i, host in enumerate(("node0", "node1")):
        write(run, train_job(), f"{host}.xplane.pb", host=host,
              profile_start_ns=1_700_000_000_000_000_000 + 5 * i)
    trace = tracelens.load(tmp_path)
    assert trace.meta.steps_source == "program:jit_train(7)"
    # node1's profile starts 5 ns later: its windows are 5 ns later on the common clock
    assert windows(trace) == [(0, 0, 0, 1000, "program"), (0, 1, 1000, 2000, "program"),
                              (0, 2, 2000, 2460, "program"), (1, 0, 5, 1005, "program"),
                              (1, 1, 1005, 2005, "program"), (1, 2, 2005, 2465, "program")]


def test_annotations_win_over_programs(tmp_path: Path) -> None:
    trace = tracelens.load(write(tmp_path, train_job(), steps=[(4, 0, 1500), (5, 1500, 2600)]))
    assert trace.meta.steps_source == "annotation"
    assert windows(trace) == [(0, 4, 0, 1500, "step_num"), (0, 5, 1500, 2600, "step_num")]


def test_step_marker_on_xspace_host_annotations(tmp_path: Path) -> None:
    notes = [(7, "step 10", 0, 900), (7, "step 11", 1000, 900), (7, "other", 0, 3000),
             (8, "step 11", 1100, 1000)]  # another thread's range of step 11 widens it
    path = write(tmp_path, train_job(), annotations=notes, steps=[(0, 0, 3000)])
    trace = tracelens.load(path, step_marker=r"^step (\d+)$")
    assert trace.meta.steps_source == r"marker:^step (\d+)$"
    assert windows(trace) == [(0, 10, 0, 900, "marker"), (0, 11, 1000, 2100, "marker")]
    assert any("replaces the trace's own 1 annotated steps" in w for w in trace.meta.warnings)
    ordered = tracelens.load(path, step_marker="^step")  # no number: numbered in order
    assert [r[1:4] for r in windows(ordered)] == [(0, 0, 900), (1, 1000, 1900),
                                                 (2, 1100, 2100)]
    assert any("1 steps from --step-marker '^step' overlap" in w for w in ordered.meta.warnings)
    marks = [xspace_reader.read(path, decoder=d, marker="^step").host_events.filter(
        pl.col("kind") == "marker").sort("start_ns", "tid") for d in ("c", "python")]
    assert marks[0].equals(marks[1]) and marks[0]["name"].to_list() == ["step 10", "step 11",
                                                                        "step 11"]


def test_step_marker_on_program_names(tmp_path: Path) -> None:
    path = write(tmp_path, train_job())
    trace = tracelens.load(path, step_marker="eval")
    assert trace.meta.steps_source == "marker:eval"
    assert windows(trace) == [(0, 0, 600, 1600, "program"), (0, 1, 1600, 1860, "program")]
    several = tracelens.load(path, step_marker="^jit_")  # the heaviest, even if it runs once
    assert windows(several) == [(0, 0, 3000, 8000, "program")]
    assert any("names 3 programs; the steps are the executions of jit_init(9), the one "
               "with the most device time" in w for w in several.meta.warnings)
    none = tracelens.load(path, step_marker="^nothing")
    assert none.meta.steps_source == "none" and none.steps.is_empty()
    assert any("no ROCTx range matches --step-marker '^nothing' (nor any XSpace host "
               "annotation or program name): no steps" in w for w in none.meta.warnings)


def test_step_marker_and_steps_source_on_every_command(tmp_path: Path) -> None:
    path = str(write(tmp_path, train_job()))
    runner = CliRunner()

    def run(*args: str) -> dict:
        res = runner.invoke(main, [*args, "--step-marker", "<b>|eval"], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout) if "--format" in args else {}

    assert run("summarize", path, "--format", "json")["steps_source"] == "marker:<b>|eval"
    assert run("collectives", path, "--format", "json")["steps_source"] == "marker:<b>|eval"
    cmp = run("compare", path, path, "--format", "json", "--html", str(tmp_path / "c.html"))
    assert "(steps from marker:&lt;b&gt;|eval)" in (tmp_path / "c.html").read_text()
    assert cmp["base"]["steps_source"] == cmp["new"]["steps_source"] == "marker:<b>|eval"
    assert cmp["base"]["steps"] == 2
    sc = run("scaling", path, path, "--format", "json", "--html", str(tmp_path / "s.html"))
    assert "<small>from marker:&lt;b&gt;|eval</small>" in (tmp_path / "s.html").read_text()
    assert [r["steps_source"] for r in sc["runs"]] == ["marker:<b>|eval"] * 2
    out = tmp_path / "r.html"
    run("report", path, "-o", str(out))
    html = out.read_text()
    assert "from marker:&lt;b&gt;|eval" in html and "marker:<b>" not in html
    assert "from program:jit_train(7)" in runner.invoke(main, ["summarize", path]).stdout


def test_real_gemm_trace_steps_are_jit_dot_49() -> None:
    """The gemm micro-benchmark has no StepTraceAnnotation; jit_dot(49) has the most device
    time (1.833 ms) and runs 3 times: one hipBLASLt kernel (custom-call.1) per execution."""
    trace = tracelens.load(real_trace(GPU_TRACES["gemm08"]))
    assert trace.meta.steps_source == "program:jit_dot(49)"
    prog = trace.events.filter(pl.col("program_id") == 49).sort("start_ns")
    assert prog["op"].to_list() == ["custom-call.1"] * 3
    starts, last = prog["start_ns"].to_list(), prog["end_ns"].max()
    assert windows(trace) == [(0, k, s, e, "program") for k, (s, e) in
                              enumerate(zip(starts, starts[1:] + [last]))]
    assert [w[2] for w in windows(trace)] == [4_894_606, 5_647_927, 6_348_688]
    assert windows(trace)[-1][3] == 6_922_089


def _by_hand(trace: tracelens.Trace, program: int) -> list[tuple[int, int]]:
    """Step windows of ``program`` computed row by row: per device the k-th occurrence of
    the (op, name) of its earliest kernel; per k the earliest over devices."""
    rows = sorted(trace.events.filter(pl.col("program_id") == program).iter_rows(named=True),
                  key=lambda r: (r["start_ns"], r["stream"], r["op"], r["name"]))
    first: dict[int, tuple[str, str]] = {}
    occ: dict[int, list[int]] = {}
    for r in rows:
        first.setdefault(r["device"], (r["op"], r["name"]))
        if (r["op"], r["name"]) == first[r["device"]]:
            occ.setdefault(r["device"], []).append(r["start_ns"])
    assert len({len(v) for v in occ.values()}) == 1
    starts = [min(v[k] for v in occ.values()) for k in range(len(next(iter(occ.values()))))]
    return list(zip(starts, starts[1:] + [max(r["end_ns"] for r in rows)]))


@pytest.mark.parametrize("name, program, n", [("conv08", 15, 5), ("attention08", 59, 3)])
def test_real_traces_steps_by_hand(name: str, program: int, n: int) -> None:
    trace = tracelens.load(real_trace(GPU_TRACES[name]))
    module = trace.events.filter(pl.col("program_id") == program)["module"][0]
    assert trace.meta.steps_source == f"program:{module}({program})"
    assert [(w[2], w[3]) for w in windows(trace)] == _by_hand(trace, program)
    assert trace.steps.height == n
    assert tracelens.summarize(trace)["headline"]["steps"] == n


def test_real_cpu_trace_keeps_its_annotations() -> None:
    trace = tracelens.load(real_trace(CPU_TRACE))
    assert trace.meta.steps_source == "annotation"
    assert windows(trace) == [(0, 0, 66_750, 11_906_992, "step_num"),
                              (0, 1, 11_953_752, 21_264_547, "step_num"),
                              (0, 2, 21_309_274, 29_512_650, "step_num")]


def test_samples_keep_annotation_steps() -> None:
    trace = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    assert trace.meta.steps_source == "annotation" and trace.steps.height == 3


ASYNC = Path(__file__).resolve().parent / "data" / "jax_async" / "async_steps.xplane.pb"


def test_async_dispatch_annotations_give_way_to_the_program_executions() -> None:
    """A real JAX loop that does not wait for each step: every StepTraceAnnotation spans the
    host dispatching the step (a few µs) and the device runs it afterwards. The annotations
    made 5 steps with a median of 0.010 ms and every device event outside them; the steps are
    now the executions of the step program, numbered as the annotations, with a warning."""
    raw = xspace_reader.read(ASYNC)  # the reader's own annotations, before the steps stage
    assert raw.steps.height == 5
    annotated = (raw.steps["end_ns"] - raw.steps["start_ns"]).median()
    assert annotated < 100_000  # dispatch windows: a few µs (the first one ~1 ms)
    trace = tracelens.load(ASYNC)
    assert trace.meta.steps_source == "program:jit_step(6)"
    assert trace.steps["step"].to_list() == sorted(raw.steps["step"].to_list())
    assert trace.events["step"].null_count() == 0
    # by hand: step k starts at the k-th run of the program's first kernel
    first = trace.events.sort("start_ns").row(0, named=True)["name"]
    starts = trace.events.filter(pl.col("name") == first).sort("start_ns")["start_ns"]
    assert trace.steps.sort("step")["start_ns"].to_list() == starts.to_list()
    warning = next(w for w in trace.meta.warnings if w.startswith("the step annotations"))
    assert "asynchronous dispatch" in warning and "jit_step(6), which runs once per" in warning
    assert warning.endswith("numbered as the annotations")
    median = tracelens.summarize(trace)["headline"]["median_step_ns"]
    assert median > 1_000_000  # the device's step, milliseconds, not the 10 µs dispatch


def test_annotations_that_hold_most_device_time_stay_and_say_what_they_miss() -> None:
    """The H100 sample's step markers end before the devices finish (83% of device time
    inside them): they stay the steps, and a warning gives the share."""
    trace = tracelens.load(SAMPLES / "h100_8gpu_moe_ddp.xplane.pb")
    assert trace.meta.steps_source == "annotation"
    assert any(w.startswith("the step annotations hold 83.3% of device time")
               for w in trace.meta.warnings)
    full = tracelens.load(SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb")  # 100%: no warning
    assert not any(w.startswith("the step annotations") for w in full.meta.warnings)


@pytest.mark.parametrize("path", ["c", "numpy"])
def test_inside_share_is_exact_against_the_union_of_windows(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against a per-nanosecond count on random intervals and overlapping windows, with
    events of two ranks or of one (windows of both ranks: the other's count for nothing);
    by the covered-time pass of ``_tracelens_sweep`` and by the numpy reference."""
    import random

    import tracelens.loading.steps as steps_mod
    from tracelens.loading.steps import inside_share
    from tracelens.core.sweep import SWEEP_ENV

    if path == "c" and steps_mod._SWEEP is None:
        pytest.skip("_tracelens_sweep is not built (no compiler at install)")
    if path == "numpy":
        monkeypatch.setenv(SWEEP_ENV, "numpy")
    monkeypatch.setattr(steps_mod, "_window_time_sum" if path == "c" else "_inside_in_c",
                        None)  # the other path is not taken

    rng = random.Random(7)
    for trial in range(80):
        ranks = (0, 1) if trial % 2 else (trial % 4 // 2,)
        ev = [(rng.choice(ranks), s, s + rng.randrange(1, 40))
              for s in (rng.randrange(200) for _ in range(30))]
        win = [(rng.randrange(2), s, s + rng.randrange(1, 60))
               for s in (rng.randrange(200) for _ in range(rng.randrange(1, 6)))]
        covered = {(r, t) for r, s, e in win for t in range(s, e)}
        want = sum((r, t) in covered for r, s, e in ev for t in range(s, e)) / \
            sum(e - s for _, s, e in ev)
        events = pl.DataFrame(ev, schema=["rank", "start_ns", "end_ns"], orient="row")
        steps = pl.DataFrame(win, schema=["rank", "start_ns", "end_ns"], orient="row")
        assert inside_share(events, steps) == pytest.approx(want, abs=1e-12)


def test_annotated_steps_stay_when_other_work_runs_outside_them(tmp_path: Path) -> None:
    """A long program after the annotated steps (jit_init, 5 µs of the 6.7 µs per device)
    leaves most device time outside the annotations, but the step program runs inside them:
    the annotations stay the steps, with a warning of the share they hold."""
    path = write(tmp_path, train_job(), steps=[(0, 0, 1000), (1, 1000, 2000), (2, 2000, 2900)])
    trace = tracelens.load(path)
    assert trace.meta.steps_source == "annotation"
    assert windows(trace) == [(0, 0, 0, 1000, "step_num"), (0, 1, 1000, 2000, "step_num"),
                              (0, 2, 2000, 2900, "step_num")]
    # per device: jit_train 3 × 400 + jit_eval 2 × 250 inside, of 1200 + 500 + 5000 + 20
    assert any(w.startswith(f"the step annotations hold {100 * 1700 / 6720:.1f}% of device "
                            "time") for w in trace.meta.warnings), trace.meta.warnings


def test_step_marker_ranges_say_how_much_device_time_they_hold(tmp_path: Path) -> None:
    """--step-marker ranges are host ranges too: the share of device time inside them is
    given when it is under 90% (kept as the steps: the user chose them)."""
    notes = [(7, "step 10", 0, 900), (7, "step 11", 1000, 900), (8, "step 11", 1100, 1000)]
    trace = tracelens.load(write(tmp_path, train_job(), annotations=notes),
                           step_marker=r"^step (\d+)$")
    assert windows(trace) == [(0, 10, 0, 900, "marker"), (0, 11, 1000, 2100, "marker")]
    # inside [0, 900) and [1000, 2100): GPU 0 400 + 400 + 40 + 50 + 500 eval, GPU 1 (10 ns
    # later) 400 + 400 + 40 + 40 + 500, of 6720 each (jit_init's 5000 runs after them)
    share = 100 * (1390 + 1380) / (2 * 6720)
    assert f"the --step-marker '^step (\\\\d+)$' ranges hold {share:.1f}% of device time" in \
        " ".join(trace.meta.warnings), trace.meta.warnings
