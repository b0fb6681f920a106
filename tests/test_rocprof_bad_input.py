"""rocprofv3 inputs that cannot be read: exit 2 with one line ``error: <path>: <problem>``; the
database is never modified and nothing is written next to the inputs."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracelens
from tracelens_dev.writers.rocprof import write_csv, write_json, write_rocpd
from tests.conftest import SAMPLES, cli
from tracelens.core.errors import TraceInputError
from tests.test_bad_input import _assert_one_line_error


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("good") / "1_results.db"
    write_rocpd(tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"), path)
    return path


def _sqlite(path: Path, *tables: str) -> Path:
    con = sqlite3.connect(path)
    for t in tables:
        con.execute(f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, x TEXT)")
    con.commit()
    con.close()
    return path


def _cases(d: Path, good_db: Path) -> list[tuple[Path, str]]:
    cases = [(_sqlite(d / "other.db", "customers", "orders"), "not a rocprofv3 rocpd database"),
             (_sqlite(d / "trace.rpd", "rocpd_op", "rocpd_api_ops", "rocpd_string"),
              "rocpd_op lacks column(s) gpuId, queueId, start, end, description_id, "
              "opType_id: not an RPD schema")]
    raw = good_db.read_bytes()
    p = d / "truncated_results.db"
    p.write_bytes(raw[: len(raw) // 2])
    cases.append((p, "truncated SQLite database"))
    p = d / "header_only_results.db"
    p.write_bytes(raw[:100])
    cases.append((p, "truncated SQLite database"))
    p = d / "9_kernel_trace.csv"
    p.write_text('"Kind","Agent_Id","Queue_Id","Kernel_Name","Correlation_Id"\n'
                 '"KERNEL_DISPATCH",2,1,"k",1\n')
    cases.append((p, "lacks column(s) Start_Timestamp, End_Timestamp"))
    bad_num = d / "num"
    bad_num.mkdir()
    p = bad_num / "9_kernel_trace.csv"
    p.write_text('"Kind","Agent_Id","Queue_Id","Kernel_Name","Start_Timestamp","End_Timestamp"\n'
                 '"KERNEL_DISPATCH",2,1,"k",12abc,20\n')
    cases.append((p, "1 without a valid Start_Timestamp"))
    p = d / "plain.csv"
    p.write_text("a,b,c\n1,2,3\n")
    cases.append((p, "not rocprofv3 output"))
    p = d / "other_results.json"
    p.write_text(json.dumps({"version": 1, "events": []}))
    cases.append((p, "JSON of an unknown kind"))
    p = d / "empty_results.json"
    p.write_text(json.dumps({"rocprofiler-sdk-tool": []}))
    cases.append((p, "holds no process"))
    p = d / "cut_results.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"rocprofiler-sdk-tool": [{}]}).encode())[:-12])
    cases.append((p, "gzip"))
    p = d / "broken_results.json"
    p.write_text('{"rocprofiler-sdk-tool": [{"agents": [')
    cases.append((p, "corrupt or truncated JSON"))
    p = d / "typed_results.json"
    p.write_text(json.dumps({"rocprofiler-sdk-tool": [{"buffer_records": {
        "kernel_dispatch": [{"start_timestamp": "soon"}]}}]}))
    cases.append((p, "1 without a valid start_timestamp"))
    return cases


def test_bad_rocprof_inputs_exit_2_with_one_line(tmp_path: Path, good_db: Path) -> None:
    for path, words in _cases(tmp_path, good_db):
        _assert_one_line_error(cli("summarize", str(path)), path, words)


def test_inputs_are_never_modified_and_nothing_is_written_beside_them(
        tmp_path: Path, good_db: Path) -> None:
    cases = _cases(tmp_path, good_db)
    copy = tmp_path / "good" / "1_results.db"
    copy.parent.mkdir()
    copy.write_bytes(good_db.read_bytes())
    os.utime(copy, ns=(1_000_000_000, 1_000_000_000))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")
              if p.is_file()}
    listing = sorted(tmp_path.rglob("*"))
    for path, _ in cases:
        cli("summarize", str(path))
    res = cli("summarize", str(copy), "--step-marker", r"^step (\d+)$", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["headline"]["steps"] == 3
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")
             if p.is_file()}
    assert after == before
    assert sorted(tmp_path.rglob("*")) == listing


def test_bad_step_marker_is_a_usage_error(good_db: Path) -> None:
    res = cli("summarize", str(good_db), "--step-marker", "(")
    assert res.returncode == 2 and "not a regular expression" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def small_outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("small")
    trace = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    trace.events = trace.events.head(40)
    write_rocpd(trace, d / "1_results.db")
    write_json(trace, d / "1_results.json")
    files = write_csv(trace, d / "csv", layout="7")
    kernel_csv = next(f for f in files if f.name.endswith("kernel_trace.csv"))
    return {"1_results.db": (d / "1_results.db").read_bytes(),
            "1_results.json": (d / "1_results.json").read_bytes(),
            "1_kernel_trace.csv": kernel_csv.read_bytes()}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["1_results.db", "1_results.json", "1_kernel_trace.csv"]),
       cut=st.floats(0.0, 1.0), flips=st.lists(st.tuples(st.floats(0.0, 1.0),
                                                          st.integers(0, 255)), max_size=8))
def test_fuzzed_outputs_load_or_fail_cleanly(small_outputs: dict[str, bytes], tmp_path: Path,
                                            name: str, cut: float,
                                            flips: list[tuple[float, int]]) -> None:
    data = bytearray(small_outputs[name])
    for where, value in flips:
        data[int(where * (len(data) - 1))] = value
    data = data[: max(1, int(cut * len(data)))] if cut < 0.98 else data
    path = tmp_path / name
    path.write_bytes(bytes(data))
    try:
        tracelens.load(path)
    except TraceInputError as exc:
        assert exc.problem and "\n" not in exc.problem


def test_damaged_deflate_in_a_db_gz_is_one_error_and_leaves_no_copy(
        tmp_path: Path, good_db: Path, monkeypatch) -> None:
    """A damaged deflate stream past the sniff window ended in a ``zlib.error`` traceback
    from the inflated copy of a ``.db.gz``; now one error line, and the copy is removed."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    packed = bytearray(gzip.compress(good_db.read_bytes() * 4))
    at = len(packed) // 2  # far past the sniff's first 64 KiB of inflated bytes
    packed[at:at + 64] = b"\xff" * 64
    p = tmp_path / "1_results.db.gz"
    p.write_bytes(bytes(packed))
    with pytest.raises(TraceInputError, match="corrupt or truncated gzip data"):
        tracelens.load([p])
    assert list(scratch.iterdir()) == []
