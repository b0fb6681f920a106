"""The `tracelens` command: the JSON contract, every output format, explain, the sample trace."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import GPU_TRACES, SAMPLES, cli, real_trace
from tracelens.analyze.timeline.breakdown import TIMELINE_COLUMNS
from tracelens.cli.commands import main

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"


def invoke(*args: str) -> str:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_json_contract_on_sample() -> None:
    out = json.loads(invoke("summarize", "--format", "json", str(SAMPLE)))
    assert {"tracelens_version", "inputs", "warnings", "devices", "top_kernels"} <= set(out)
    assert out["inputs"] == [{"path": str(SAMPLE), "format": "xspace"}]
    assert isinstance(out["warnings"], list)
    assert len(out["devices"]) == 8
    for d in out["devices"]:
        assert {"host", "rank", "device", "arch", "product", "timeline", "categories",
                "steps"} <= set(d)
        assert set(d["timeline"]) == {*TIMELINE_COLUMNS, "idle_breakdown"}
        assert sum(d["timeline"]["idle_breakdown"].values()) == d["timeline"]["idle_ns"]
        assert all(set(c) == {"category", "count", "sum_ns", "exclusive_ns"}
                   for c in d["categories"])
        assert [s["step"] for s in d["steps"]] == [0, 1, 2]
        assert all({"step", "start_ns", "end_ns", "timeline"} <= set(s) for s in d["steps"])
    assert all({"name", "category", "rule", "count", "sum_ns"} <= set(k)
               for k in out["top_kernels"])


def test_sample_reproduces_its_ground_truth() -> None:
    truth = json.loads((SAMPLES / "mi300x_8gpu_llama_step.truth.json").read_text())
    out = json.loads(invoke("summarize", "--format", "json", str(SAMPLE)))
    got = {d["device"]: d for d in out["devices"]}
    for want in truth["devices"]:
        d = got[want["device"]]
        assert d["host"] == truth["host"]
        assert {k: d["timeline"][k] for k in want["timeline"]} == want["timeline"]
        for ws, gs in zip(want["steps"], d["steps"]):
            assert (gs["step"], gs["start_ns"], gs["end_ns"]) == (
                ws["step"], ws["start_ns"], ws["end_ns"])
            assert {k: gs["timeline"][k] for k in ws["timeline"]} == ws["timeline"]


def test_csv_rows_per_device_and_step() -> None:
    rows = list(csv.DictReader(io.StringIO(invoke("summarize", "--format", "csv",
                                                  str(SAMPLE)))))
    assert len(rows) == 8 * (1 + 3)
    whole = [r for r in rows if r["step"] == ""]
    assert all(int(r["compute_ns"]) + int(r["exposed_comm_ns"]) + int(r["exposed_memory_ns"])
               + int(r["idle_ns"]) == int(r["span_ns"]) for r in rows)
    assert all(sum(int(r[f"excl_{c}"]) for c in ("gemm", "attention", "convolution",
                                                "elementwise", "reduction", "other",
                                                "collective", "memory"))
               == int(r["busy_ns"]) for r in whole)


def test_markdown_and_table_outputs() -> None:
    md = invoke("summarize", "--format", "markdown", "--top", "3", "--all", str(SAMPLE))
    assert "## Per-device timeline" in md and "| gemm |" in md
    short = invoke("summarize", "--format", "markdown", str(SAMPLE))
    assert "## What to fix first" in short and "## Per-device timeline" not in short
    table = invoke("summarize", str(SAMPLE))
    assert "AMD Instinct MI300X" in table and "exposed communication" in table


def test_untrusted_names_are_escaped_in_markdown(tmp_path: Path) -> None:
    from tracelens_dev.writers.xspace import Activity, build_xspace

    p = tmp_path / "evil.xplane.pb"
    p.write_bytes(build_xspace([Activity(0, 1, "x|<script>alert(1)</script>[bold]", 0, 10)]))
    md = invoke("summarize", "--format", "markdown", str(p))
    assert "<script>" not in md and "x\\|&lt;script&gt;" in md
    assert "[bold]" in invoke("summarize", str(p))  # rich shows it literally, no markup


def test_device_and_step_filters_and_unknown_values() -> None:
    out = json.loads(invoke("summarize", "--format", "json", "--device", "3", "--step", "1",
                            str(SAMPLE)))
    assert [d["device"] for d in out["devices"]] == [3]
    assert out["devices"][0]["timeline"]["span_ns"] == 6_000_000



@pytest.mark.parametrize("command", ["summarize", "report"])
@pytest.mark.parametrize("flag, value, problem", [
    ("--step", "99", "step 99 is not in the trace (steps: [0, 1, 2], from annotation)"),
    ("--device", "12", "device 12 is not in the trace (devices: [0, 1, 2, 3, 4, 5, 6, 7])")])
def test_unknown_step_or_device_is_one_error_line(command: str, flag: str, value: str,
                                                   problem: str, tmp_path: Path) -> None:
    """Not click's usage text: the documented ``error: <path>: <problem>`` line, exit 2."""
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    res = cli(command, str(SAMPLE), flag, value, *extra)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"error: {SAMPLE}: {problem}\n"
    assert not (tmp_path / "r.html").exists()


def test_summarize_real_conv_trace() -> None:
    text = invoke("summarize", str(real_trace(GPU_TRACES["conv08"])))
    assert "8 active of 8" in text and "AMD Instinct MI300X" in text


def test_explain() -> None:
    text = invoke("explain", "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
                  "--op", "all-gather-start.3")
    assert "category:    collective" in text and "subcategory: all-gather" in text
    text = invoke("explain", "__amd_rocclr_copyBuffer.kd")
    assert "category:    memory" in text and "rule:        memory." in text


def test_rules_file_overrides(tmp_path: Path) -> None:
    rules = tmp_path / "mine.toml"
    rules.write_text('[[rule]]\nid = "mine.adds"\ncategory = "reduction"\n'
                     'name = "^loop_add_fusion"\ndescription = "site rule"\n')
    out = json.loads(invoke("summarize", "--format", "json", "--rules", str(rules),
                            str(SAMPLE)))
    cats = {c["category"] for d in out["devices"] for c in d["categories"]}
    assert "elementwise" not in cats
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rule]]\nid = 'x'\ncategory = 'nonsense'\nname = 'a'\n")
    res = CliRunner().invoke(main, ["summarize", "--rules", str(bad), str(SAMPLE)])
    assert res.exit_code == 2 and f"error: {bad}" in res.stderr


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_cpu_trace_all_formats(fmt: str) -> None:
    from tests.conftest import CPU_TRACE

    invoke("summarize", "--format", fmt, str(real_trace(CPU_TRACE)))


@pytest.mark.parametrize("args, code", [(["--version"], 0), (["summarize", "/nonexistent.pb"], 2)])
def test_the_installed_command_keeps_the_exit_code_and_freezes_the_collector(
        args: list[str], code: int) -> None:
    """The console script is ``cli.run``: ``main``'s exit code unchanged, and every object
    left frozen, so the interpreter's last collection does not walk them (0.06 s of a 2M-event
    ``summarize``)."""
    import subprocess
    import sys
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert scripts["project"]["scripts"]["tracelens"] == "tracelens.cli.commands:run"
    prog = ("import gc, sys; from tracelens.cli.commands import run; "
            f"sys.argv = ['tracelens', *{args!r}]\n"
            "try:\n run()\nexcept SystemExit as e:\n"
            " print('exit', e.code, gc.get_freeze_count() > 1000)")
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                         check=True)
    assert out.stdout.splitlines()[-1].split() == ["exit", str(code), "True"]


@pytest.mark.parametrize("preset, want", [(None, "1"), ("4", "4")])
def test_the_command_starts_numpy_with_one_blas_thread(preset: str | None, want: str) -> None:
    """The command asks OpenBLAS for one thread before numpy is imported (it makes no BLAS
    call; the pool's spinning threads cost CPU), unless the caller set a number."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = ("import os, sys; from tracelens.cli.commands import main; "
            "sys.argv = ['tracelens', 'summarize', '--help']; "
            "exec('try:\\n main()\\nexcept SystemExit:\\n pass'); "
            "print('blas', 'numpy' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.splitlines()[-1].split() == ["blas", "False", want]
