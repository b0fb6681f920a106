"""One way in (issue 47): every command is options -> one facade call -> render. For every
command with JSON output, ``tracelens.to_json(<the facade call>)`` is byte for byte what
``tracelens <command> --format json`` prints on the bundled samples, and a bad argument gives
the same message from both (the CLI's ``error: <path>: <problem>`` line, or click's usage
error, exit 2). Every result shows itself in a notebook in a screen or less."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

import tracelens
from tests.conftest import SAMPLES, cli
from tracelens.api.analysis import TraceAnalysis
from tracelens.core.errors import TraceInputError, TraceUsageError

LLAMA = str(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
FSDP = str(SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb")
STRAGGLER = str(SAMPLES / "mi355x_2x8gpu_straggler")
TPU = str(SAMPLES / "tpu" / "remat.xplane.pb")
MEMORY_TPU = str(SAMPLES / "tpu" / "memory" / "remat.xplane.pb.gz")
HLO_DUMP = str(SAMPLES / "hlo" / "module_0024.loop_step.after_optimizations.txt")


def _json(*args: str) -> str:
    res = cli(*args, "--format", "json", *(("--quiet",) if args[0] != "history" else ()))
    assert res.returncode == 0, res.stderr
    return res.stdout


# (command line, the facade call that must give the same JSON)
SAME: list[tuple[tuple[str, ...], Callable[[], Any]]] = [
    (("summarize", LLAMA), lambda: TraceAnalysis(LLAMA).summarize()),
    (("summarize", STRAGGLER, "--step", "1", "--device", "3", "--top", "4"),
     lambda: TraceAnalysis(STRAGGLER).summarize(device=3, step=1, top=4)),
    (("summarize", TPU), lambda: TraceAnalysis(TPU).summarize()),
    (("summarize", LLAMA, "--kernel", "gemm|Cijk", "--host", "mi300x-node0"),
     lambda: TraceAnalysis(LLAMA, kernel="gemm|Cijk", hosts=["mi300x-node0"]).summarize()),
    (("collectives", STRAGGLER, "--top", "3"),
     lambda: TraceAnalysis(STRAGGLER).collectives_report(top=3)),
    (("collectives", LLAMA, "--category", "collective", "--mesh", "dp=2,tp=4"),
     lambda: TraceAnalysis(LLAMA, categories=["collective"]).collectives_report(
         mesh="dp=2,tp=4")),
    (("axes", STRAGGLER), lambda: TraceAnalysis(STRAGGLER).axes()),
    (("axes", LLAMA, "--mesh", "dp=2,tp=4"), lambda: TraceAnalysis(LLAMA).axes("dp=2,tp=4")),
    (("critical-path", LLAMA), lambda: TraceAnalysis(LLAMA).critical_path()),
    (("critical-path", TPU, "--step", "1", "--top", "3"),
     lambda: TraceAnalysis(TPU).critical_path(step=1, top=3)),
    (("critical-path", LLAMA, "--time", "1ms:9ms"),
     lambda: TraceAnalysis(LLAMA).critical_path(time="1ms:9ms")),
    (("hlo", LLAMA), lambda: TraceAnalysis(LLAMA).hlo_lens()),
    (("hlo", HLO_DUMP, "--top", "2"), lambda: TraceAnalysis(HLO_DUMP).hlo_lens(top=2)),
    (("compare", LLAMA, FSDP), lambda: tracelens.compare(LLAMA, FSDP)),
    (("compare", LLAMA, FSDP, "--top", "3", "--kernel", ".", "--fail-above", "1000"),
     lambda: tracelens.compare(LLAMA, FSDP, top=3, fail_above=1000, kernel=".")),
    (("summarize", MEMORY_TPU, "--all"),
     lambda: TraceAnalysis(MEMORY_TPU).summarize(memory=True)),
    (("memory", MEMORY_TPU, "--top", "3"),
     lambda: TraceAnalysis(MEMORY_TPU).memory_report(top=3)),
    (("scaling", LLAMA, FSDP, "--strong"),
     lambda: tracelens.scaling([LLAMA, FSDP], strong=True)),
]


@pytest.mark.parametrize("args, call", SAME, ids=[" ".join(
    Path(a).name for a in args) for args, _ in SAME])
def test_the_facade_call_gives_the_commands_json(args: tuple[str, ...],
                                                  call: Callable[[], Any]) -> None:
    assert _json(*args) == tracelens.to_json(call()) + "\n"


def test_history_json_is_the_facades(tmp_path: Path) -> None:
    from tracelens import history_check, history_record, history_runs, history_show

    store = tmp_path / "runs.db"
    got = history_record([LLAMA], store, label="a", tags=["job=llama"],
                         recorded_at="2026-01-01T00:00:00Z")
    assert got.added and got.label == "a"
    again = cli("history", "add", LLAMA, "--store", str(store))
    assert again.returncode == 0 and "already recorded as a" in again.stderr
    assert history_record([LLAMA], store).added is False
    s = str(store)
    assert _json("history", "check", "--store", s) == tracelens.to_json(
        history_check(s)) + "\n"
    assert _json("history", "show", "--store", s, "--tag", "job=llama") == tracelens.to_json(
        history_show(s, tags={"job": "llama"})) + "\n"
    assert _json("history", "list", "--store", s) == tracelens.to_json(
        tuple(history_runs(s))) + "\n"
    for r in (history_check(s), history_show(s), history_runs(s)[0]):
        assert len(repr(r)) < 2000 and len(r._repr_html_()) < 10_000


def _cli_error(*args: str) -> str:
    res = cli(*args)
    assert res.returncode == 2 and res.stdout == "", (res.returncode, res.stdout)
    return res.stderr


def _input_error(call: Callable[[], object]) -> str:
    with pytest.raises(TraceInputError) as info:
        call()
    return f"error: {info.value.path}: {info.value.problem}\n"


@pytest.mark.parametrize("args, call", [
    (("summarize", LLAMA, "--step", "999"), lambda tmp: TraceAnalysis(LLAMA).summarize(step=999)),
    (("summarize", STRAGGLER, "--device", "99"),
     lambda tmp: TraceAnalysis(STRAGGLER).summarize(device=99)),
    (("report", LLAMA, "--step", "999", "-o", "{tmp}/r.html"),
     lambda tmp: TraceAnalysis(LLAMA).window(step=999)),
    (("report", LLAMA, "--step", "999", "-o", "{tmp}/r.html"),
     lambda tmp: TraceAnalysis(LLAMA).report(f"{tmp}/r.html", step=999)),
    (("summarize", "{tmp}/missing.xplane.pb"),
     lambda tmp: TraceAnalysis(f"{tmp}/missing.xplane.pb").summary),
    (("collectives", "{tmp}/missing.xplane.pb"),
     lambda tmp: TraceAnalysis(f"{tmp}/missing.xplane.pb").collectives_report()),
    (("critical-path", LLAMA, "--window", "(unclosed"),
     lambda tmp: TraceAnalysis(LLAMA).critical_path(window="(unclosed")),
    (("hlo", LLAMA, "--program", "no-such-program"),
     lambda tmp: TraceAnalysis(LLAMA).hlo_lens(program="no-such-program")),
    (("compare", LLAMA, "{tmp}/missing.xplane.pb"),
     lambda tmp: tracelens.compare(LLAMA, f"{tmp}/missing.xplane.pb")),
    (("history", "check", "--store", "{tmp}/none.db"),
     lambda tmp: tracelens.history_check(f"{tmp}/none.db")),
    (("report", LLAMA, "-o", "{tmp}/no/such/folder/r.html"),
     lambda tmp: TraceAnalysis(LLAMA).report(f"{tmp}/no/such/folder/r.html")),
])
def test_a_bad_input_gives_the_same_error_line(args: tuple[str, ...],
                                               call: Callable[[str], object],
                                               tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert _cli_error(*argv) == _input_error(lambda: call(str(tmp_path)))
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("args, call", [
    (("summarize", LLAMA, "--time", "5ms:1ms"),
     lambda: TraceAnalysis(LLAMA, time="5ms:1ms")),
    (("summarize", LLAMA, "--time", "soon"), lambda: TraceAnalysis(LLAMA, time="soon")),
    (("summarize", LLAMA, "--kernel", "(x"), lambda: TraceAnalysis(LLAMA, kernel="(x")),
    (("summarize", LLAMA, "--gpu", "no-such-gpu"),
     lambda: TraceAnalysis(LLAMA, gpu="no-such-gpu")),
    (("axes", LLAMA, "--mesh", "dp=3"), lambda: TraceAnalysis(LLAMA).axes(mesh="dp=3")),
    (("axes", LLAMA, "--mesh", "dp"), lambda: TraceAnalysis(LLAMA).axes(mesh="dp")),
    (("scaling", LLAMA), lambda: tracelens.scaling([LLAMA])),
    (("history", "add", LLAMA, "--store", "x.db", "--tag", "oops"),
     lambda: tracelens.history_record([LLAMA], "x.db", tags=["oops"])),
])
def test_a_bad_argument_gives_the_same_usage_error(args: tuple[str, ...],
                                                   call: Callable[[], object]) -> None:
    with pytest.raises(TraceUsageError) as info:
        call()
    err = _cli_error(*args)
    assert err.rstrip("\n").splitlines()[-1] == f"Error: {info.value}"


def test_every_command_reaches_the_engine_through_the_facade() -> None:
    """The command modules import no engine, loader or analysis of their own: only the
    facade (tracelens.api.analysis, analysis_history, inputs) and the renderers."""
    import ast

    root = Path(__file__).resolve().parent.parent / "tracelens"
    glue = ("tracelens.engine.hosts", "tracelens.loading.loader", "tracelens.analyze",
            "tracelens.history",
            "tracelens.engine.protocol", "tracelens.api.jobs", "tracelens.analyze.xcheck",
            "tracelens.classify")
    for path in sorted((root / "cli").glob("*.py")):
        name = path.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(glue), (name, node.module)


def test_results_show_themselves_in_a_screen(tmp_path: Path) -> None:
    from tracelens_dev.writers.xspace import Activity, build_xspace

    a = TraceAnalysis(STRAGGLER)
    results = [a.summary, a.collectives, a.axes(), a.critical_path(), a.hlo_lens(),
               tracelens.compare(LLAMA, FSDP), tracelens.scaling([LLAMA, FSDP])]
    for r in results:
        assert len(repr(r)) < 2000, type(r).__name__
        assert len(r._repr_html_()) < 10_000, type(r).__name__
        assert r.to_dict() == tracelens.to_json.__globals__["encode"](r)
    assert len(repr(a.summary)) < 2000 and repr(a.summary).startswith("Summary(")
    import io

    from rich.console import Console
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(a.summary)
    assert len(console.export_text().splitlines()) < 60  # a screen
    assert repr(a) == f"TraceAnalysis({STRAGGLER})"
    evil = tmp_path / "evil.xplane.pb"
    evil.write_bytes(build_xspace([Activity(0, 1, "k<script>alert(1)</script>&", 0, 10)]))
    s = TraceAnalysis(str(evil)).summary
    page = s._repr_html_()
    assert "<script>" not in page and "k&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in page


def test_xcheck_prints_the_facades_rows(tmp_path: Path) -> None:
    """``xcheck``'s JSON is ``to_json`` of the facade's typed result, as every command's."""

    res = cli("xcheck", LLAMA, "--format", "json")
    assert res.returncode in (0, 1), res.stderr
    assert res.stdout == tracelens.to_json(TraceAnalysis(LLAMA).xcheck()) + "\n"
    other = tmp_path / "t.json"
    other.write_text('{"traceEvents": []}')
    assert _cli_error("xcheck", str(other)) == _input_error(
        lambda: TraceAnalysis(str(other)).xcheck())
