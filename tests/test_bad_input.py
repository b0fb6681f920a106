"""Bad input: exit code 2 and one line ``error: <path>: <problem>`` on stderr, no traceback.

Most cases run the command in this process (``tests.conftest.cli``); a few run the real
entry point, ``python -m tracelens.cli``, in a fresh interpreter (``run_cli``): its exit
code, and nothing else on its stderr."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracelens
from tests.conftest import cli
from tracelens_dev.writers.xspace import Activity, build_xspace
from tracelens.core.errors import TraceInputError


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m tracelens.cli ARGS`` in a fresh interpreter (the process boundary)."""
    return subprocess.run([sys.executable, "-m", "tracelens.cli", *args], capture_output=True,
                          text=True, timeout=120)


def _small_trace(dur: int = 50) -> bytes:
    acts = [Activity(0, 1, f"loop_add_fusion_{i}.kd", i * 100, dur, {"hlo_op": f"f.{i}"})
            for i in range(40)]
    return build_xspace(acts, steps=[(0, 0, 4000)])


def _assert_one_line_error(res: subprocess.CompletedProcess, path: Path, words: str) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    assert words in lines[0], lines[0]
    assert "Traceback" not in res.stderr and res.stdout == ""


def _cases(tmp: Path) -> list[tuple[Path, str]]:
    good = _small_trace()
    cases = []
    p = tmp / "empty.xplane.pb"
    p.write_bytes(b"")
    cases.append((p, "empty file"))
    p = tmp / "truncated.xplane.pb"
    p.write_bytes(good[: len(good) // 2])
    cases.append((p, "truncated"))
    p = tmp / "json.xplane.pb"
    p.write_text(json.dumps({"traceEvents": []}))
    cases.append((p, "JSON"))
    p = tmp / "text.xplane.pb"
    p.write_text("hello, this is not a trace\n")
    cases.append((p, "not an XSpace"))
    p = tmp / "bad.xplane.pb.gz"
    p.write_bytes(gzip.compress(good)[:-30])
    cases.append((p, "gzip"))
    p = tmp / "missing.xplane.pb"
    cases.append((p, "no such file"))
    deep = "[" * 100_000 + "]" * 100_000  # past every JSON decoder's depth limit
    p = tmp / "deep.pt.trace.json"
    p.write_text('{"schemaVersion": 1, "traceEvents": [' + deep + "]}")
    cases.append((p, "nested too deeply"))
    p = tmp / "1_results.json"
    p.write_text('{"rocprofiler-sdk-tool": [{"metadata": {"pid": 1}, "buffer_records": '
                 '{"kernel_dispatch": [' + deep + "]}}]}")
    cases.append((p, "nested too deeply"))
    d = tmp / "emptydir"
    d.mkdir()
    (d / "notes.txt").write_text("x")
    cases.append((d, "no trace files"))
    return cases


def test_bad_inputs_exit_2_with_one_line(tmp_path: Path) -> None:
    for path, words in _cases(tmp_path):
        _assert_one_line_error(cli("summarize", str(path)), path, words)


def test_bad_input_among_good_fails_whole(tmp_path: Path) -> None:
    good = tmp_path / "good.xplane.pb"
    good.write_bytes(_small_trace())
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff")
    res = run_cli("summarize", str(good), str(bad))
    _assert_one_line_error(res, bad, "corrupt or truncated")


def test_debug_shows_traceback(tmp_path: Path) -> None:
    p = tmp_path / "empty.xplane.pb"
    p.write_bytes(b"")
    res = run_cli("summarize", "--debug", str(p))
    assert res.returncode == 2 and "error: " in res.stderr


def test_two_profile_runs_in_one_logdir(tmp_path: Path) -> None:
    """The same host's file in two runs of one log directory: two jobs (tests/test_jobs.py
    has the runs that are one job)."""
    for run, dur in (("2026_01_01_00_00_00", 50), ("2026_01_02_00_00_00", 60)):
        d = tmp_path / "plugins" / "profile" / run  # two recordings (a byte-identical copy
        d.mkdir(parents=True)                      # is one file, read once)
        (d / "h.xplane.pb").write_bytes(_small_trace(dur))
    _assert_one_line_error(cli("summarize", str(tmp_path)), tmp_path, "holds 2 jobs")


def test_no_device_activity_is_not_an_error(tmp_path: Path) -> None:
    p = tmp_path / "idle.xplane.pb"
    p.write_bytes(build_xspace([], device_stats={0: {"device_vendor": "AMD"}}))
    res = cli("summarize", str(p))
    assert res.returncode == 0, res.stderr
    assert "No device activity" in res.stdout
    # the headline and that line, not a page of empty tables
    assert "0 active of 1 devices" in res.stdout and "Per-device timeline" not in res.stdout
    assert "Categories" not in res.stdout
    md = cli("summarize", "--format", "markdown", str(p)).stdout
    assert "0 active of 1 devices" in md and "## Categories" not in md
    assert "No device activity" in md
    res = cli("summarize", "--format", "json", str(p))
    out = json.loads(res.stdout)
    assert out["devices"] == [] and out["idle_devices"] == [{"host": "host0", "rank": 0,
                                                             "device": 0}]


def test_inputs_are_never_written_next_to(tmp_path: Path) -> None:
    p = tmp_path / "t.xplane.pb"
    p.write_bytes(_small_trace())
    before = sorted(tmp_path.iterdir())
    assert cli("summarize", "--format", "json", str(p)).returncode == 0
    assert sorted(tmp_path.iterdir()) == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_bytes_load_or_fail_cleanly(tmp_path: Path, data: st.DataObject) -> None:
    """Random truncations and byte flips: either a valid trace or TraceInputError, nothing else."""
    good = bytearray(_small_trace())
    cut = data.draw(st.integers(1, len(good)))
    blob = good[:cut]
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    p = tmp_path / "fuzz.xplane.pb"
    p.write_bytes(bytes(blob))
    try:
        trace = tracelens.load(p)
    except TraceInputError as exc:
        assert exc.path == str(p) and exc.problem
        return
    tracelens.summarize(trace)  # whatever decoded must also analyze


@pytest.mark.parametrize("args", [["summarize"], ["summarize", "--format", "xml", "x"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert run_cli(*args).returncode == 2


def test_oversized_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """protobuf cannot decode 2 GiB; the limit is lowered here instead of writing 2 GiB."""
    from parsers.xspace import space

    p = tmp_path / "big.xplane.pb"
    p.write_bytes(_small_trace())
    monkeypatch.setattr(space, "MAX_PROTO_BYTES", 100)
    with pytest.raises(TraceInputError, match="cannot be decoded by protobuf"):
        tracelens.load(p)


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    from tracelens.cli.common import progress_bar

    assert progress_bar([tmp_path], quiet=False) is None  # pytest captures stderr


def test_mutated_real_traces_load_or_fail_cleanly(tmp_path: Path) -> None:
    """Deterministic byte flips and cuts of the real traces (found a dangling-metadata bug and
    a mixed-width thread-id bug): a valid Trace or TraceInputError, never anything else."""
    import random

    from tests.conftest import CPU_TRACE, GPU_TRACES, real_trace

    bases = [real_trace(GPU_TRACES["gemm08"]).read_bytes(), real_trace(CPU_TRACE).read_bytes()]
    rng = random.Random(7)
    p = tmp_path / "mutant.xplane.pb"
    outcomes = {"ok": 0, "error": 0}
    for _ in range(200):
        blob = bytearray(rng.choice(bases))
        if rng.random() < 0.3:
            blob = blob[: rng.randint(1, len(blob))]
        for _ in range(rng.randint(1, 8)):
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        p.write_bytes(bytes(blob))
        try:
            tracelens.summarize(tracelens.load(p))
            outcomes["ok"] += 1
        except TraceInputError as exc:
            assert not exc.problem.startswith("unreadable"), exc.problem  # no reader crash
            outcomes["error"] += 1
    assert outcomes["ok"] and outcomes["error"]


def test_control_characters_in_a_file_name_are_escaped(tmp_path: Path) -> None:
    """A file name with a newline (or another control character) still gives one line: the
    character is written as its escape, as ``repr`` writes it (issue 25 item 12c)."""
    p = tmp_path / "two\nlines\x07.xplane.pb"
    p.write_bytes(b"")
    res = run_cli("summarize", str(p))
    shown = str(p).replace("\n", "\\n").replace("\x07", "\\x07")
    _assert_one_line_error(res, Path(shown), "empty file")
    assert TraceInputError(p, "bad\nvalue").problem == "bad\\nvalue"
