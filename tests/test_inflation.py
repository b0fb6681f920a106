"""The inflation budget (issue 25 D12): a decompression bomb or a plain file too large for the
machine is refused with one line (exit 2) naming the file, the budget and how to raise it,
in bounded memory and leaving nothing behind; real traces read as before.

The bombs are built here, cheaply: gzip members of one repeated byte (about 1000:1), written
in chunks, and for the large one the same 64 MiB member repeated (a multi-member gzip: 11 MB
holding 11 GiB, in a second of the test's time)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import tracelens
from parsers import budget
from tests.conftest import SHARED, real_rocprof, real_trace
from tests.test_rocprof_mutation import small_outputs
from tracelens.core.errors import TraceInputError

ROOT = Path(__file__).resolve().parent.parent
ENV = budget.ENV
KINETO = SHARED / "traces" / "kineto" / "mi300x_inference" / "xdit_flux1_aiter_sage_rank0.json.gz"

# (file name, first bytes: enough for sniff_format to send the file to its reader, filler)
BOMBS = {
    "kineto": ("rank0.pt.trace.json.gz", b'{"schemaVersion": 1, "traceEvents": [', b" "),
    "rocprof-json": ("1_results.json.gz", b'{"rocprofiler-sdk-tool": ', b" "),
    "xspace": ("host.xplane.pb.gz", b"\x0a", b"\x00"),
    "rocprof-csv": ("1_kernel_trace.csv.gz",
                    b"Agent_Id,Queue_Id,Kernel_Name,Start_Timestamp,End_Timestamp\n", b"\n"),
    "rocpd": ("1_results.db.gz", b"SQLite format 3\x00", b"\x00"),
}


def _member(head: bytes, fill: bytes, size: int) -> bytes:
    """One gzip member: ``head`` then ``fill`` up to ``size`` bytes, compressed in 1 MiB
    chunks (never held inflated)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(head)]
    block = fill * (1 << 20)
    for _ in range((size - len(head)) >> 20):
        out.append(z.compress(block))
    return b"".join(out) + z.flush()


def write_bomb(path: Path, fmt: str, inflated: int) -> Path:
    """A gzip of format ``fmt`` inflating to about ``inflated`` bytes: members of 64 MiB."""
    _, head, fill = BOMBS[fmt]
    per = min(inflated, 64 << 20)
    first, rest = _member(head, fill, per), _member(b"", fill, per)
    with open(path, "wb") as fh:
        fh.write(first)
        for _ in range(inflated // per - 1):
            fh.write(rest)
    return path


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracelens.cli", *args], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def _assert_refused(res: subprocess.CompletedProcess[str], path: Path, *words: str) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("fmt", list(BOMBS))
def test_bomb_is_refused_and_leaves_nothing(tmp_path: Path, fmt: str) -> None:
    """Every compressed format: a 32 MiB bomb under a 4 MiB budget is refused, one line,
    and the temp directory (where a ``.db.gz`` is inflated) is left empty."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bomb = write_bomb(tmp_path / BOMBS[fmt][0], fmt, 32 << 20)
    res = run_cli("summarize", str(bomb), env={ENV: "4M", "TMPDIR": str(tmp)})
    _assert_refused(res, bomb, "gunzips to at least", "read budget", f"{ENV}=4M", ENV)
    assert list(tmp.iterdir()) == []


def run_measured(path: Path, budget: str | None = None
                 ) -> tuple[subprocess.CompletedProcess[str], int]:
    """``tracelens summarize PATH`` under ``budget`` (None: the default), and its peak RSS in
    bytes. The
    child's address space is capped (3 GiB) so that a reader without a budget fails here
    instead of taking the machine's memory."""
    code = ("import resource, subprocess, sys\n"
            "cap = 3 << 30\n"
            "r = subprocess.run([sys.executable, '-m', 'tracelens.cli', 'summarize', sys.argv[1]],"
            " capture_output=True, text=True, preexec_fn=lambda: resource.setrlimit("
            "resource.RLIMIT_AS, (cap, cap)))\n"
            "sys.stderr.write(r.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(r.returncode)\n")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env.update({ENV: budget} if budget else {})
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, timeout=300, env={**env, "PYTHONPATH": str(ROOT)})
    return res, int(res.stdout or 0) * 1024  # ru_maxrss is in KiB on Linux


def test_real_sized_bomb_is_refused_in_little_memory(tmp_path: Path) -> None:
    """An 11 MB Kineto gzip holding 11 GiB, under the default budget: refused after about
    64 MiB of inflation (the ratio is checked as the stream is read), in under 500 MB."""
    bomb = write_bomb(tmp_path / "rank0.pt.trace.json.gz", "kineto", 11 << 30)
    assert bomb.stat().st_size < 16 << 20
    res, rss = run_measured(bomb)
    _assert_refused(res, bomb, "100 x the compressed bytes read", ENV)
    assert rss < 500 << 20


def test_sparse_json_is_refused_at_its_first_zeros(tmp_path: Path) -> None:
    """A 3 GiB sparse JSON (a header, then holes that read as zeros) within the budget (8 GiB
    here, so that the test does not depend on the machine's memory): refused at its first
    NUL byte, in under 500 MB, not after reading 3 GiB and failing to parse them."""
    path = tmp_path / "rank0.pt.trace.json"
    with open(path, "wb") as fh:
        fh.write(b'{"schemaVersion": 1, "traceEvents": [')
        fh.truncate(3 << 30)
    res, rss = run_measured(path, "8G")
    _assert_refused(res, path, "a NUL byte at offset 37: not JSON text")
    assert rss < 500 << 20


def test_bad_env_value_is_exit_2(tmp_path: Path) -> None:
    """A value that is not a size is an error for every reader, a plain rocpd ``.db`` (which
    has no size bound) included, never a silent default."""
    paths = [real_trace("mi300x_jax08_gemm.xplane.pb"), small_outputs(tmp_path, 40)["db"]]
    for path, bad in zip(paths * 2, ("lots", "0", "-5", "1x")):
        res = run_cli("summarize", str(path), env={ENV: bad})
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip().splitlines() == [
            f"error: {ENV}: must be a positive size in bytes, or with a K, M, G or T suffix "
            f"(e.g. 16G), not {bad!r}"]


@pytest.mark.parametrize("text,value", [("4096", 4096), ("4k", 4096), ("16M", 16 << 20),
                                        ("1.5G", 3 << 29), ("8GiB", 8 << 30), (" 2T ", 2 << 40)])
def test_env_sizes(monkeypatch: pytest.MonkeyPatch, text: str, value: int) -> None:
    monkeypatch.setenv(ENV, text)
    assert budget.env_limit() == value


def test_real_traces_read_under_the_default_budget(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """The real gzip traces (Kineto 16.5x, rocprofv3 JSON 22.7x, an XSpace gzipped here) and
    a rocpd ``.db.gz`` read as before, and the ``.db.gz``'s inflated copy is removed."""
    monkeypatch.delenv(ENV, raising=False)
    if not KINETO.exists():
        pytest.skip(f"real trace {KINETO} not present")
    assert tracelens.load(KINETO).events.height
    assert tracelens.load(real_rocprof("mi350x_908_results.json.gz")).events.height
    xs = tmp_path / "gemm.xplane.pb.gz"
    xs.write_bytes(gzip.compress(real_trace("mi300x_jax08_gemm.xplane.pb").read_bytes()))
    assert tracelens.load(xs).events.height
    out = small_outputs(tmp_path / "small", 120)
    db = tmp_path / "1_results.db.gz"
    db.write_bytes(gzip.compress(out["db"].read_bytes()))
    csv = tmp_path / "1_kernel_trace.csv.gz"
    csv.write_bytes(gzip.compress(out["csv"].read_bytes()))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    plain = tracelens.load(out["db"]).events
    assert tracelens.load(db).events.equals(plain)
    assert tracelens.load(csv).events.height == tracelens.load(out["csv"]).events.height > 0
    assert list(tmp.iterdir()) == []


def test_plain_file_past_the_budget_is_refused_unread(tmp_path: Path) -> None:
    """A plain (sparse) JSON larger than the budget is refused from its size, before it is
    read: no 'Not enough memory' after gigabytes."""
    path = tmp_path / "sparse.json"
    with open(path, "wb") as fh:
        fh.write(b'{"schemaVersion": 1, "traceEvents": [')
        fh.truncate(64 << 20)
    res = run_cli("summarize", str(path), env={ENV: "16M"})
    _assert_refused(res, path, "64.0 MiB to hold in memory", f"{ENV}=16M")


def _small_cells_csv(path: Path, rows: int) -> Path:
    with open(path, "wb") as fh:
        fh.write(b"Agent_Id,Queue_Id,Kernel_Name,Start_Timestamp,End_Timestamp\n")
        fh.write(b"1,1,k,1,2\n" * rows)
    return path


def test_csv_is_bounded_by_the_frame_it_makes(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A CSV of one-byte cells takes 16 bytes per cell in polars: 1 MB of text under a 4 MiB
    budget is refused (about 9 MiB to hold) though the file itself is within it, and reads
    under a larger one (as one record: its rows are all the same dispatch, a copy of the
    first, dropped and counted)."""
    path = _small_cells_csv(tmp_path / "1_kernel_trace.csv", 100_000)
    monkeypatch.setenv(ENV, "4M")
    with pytest.raises(TraceInputError, match=r"100,001 lines of 5 fields, about 8\.6 MiB to "
                       rf"hold in memory, past the read budget \({ENV}=4M\)"):
        tracelens.load(path)
    monkeypatch.setenv(ENV, "64M")
    trace = tracelens.load(path)
    assert trace.events.height == 1
    assert any("dropped 99999 kernel dispatches that repeat" in w for w in trace.meta.warnings)


def test_truncated_gzip_is_still_damage_not_budget(tmp_path: Path) -> None:
    src = real_trace("mi300x_jax08_gemm.xplane.pb").read_bytes()
    path = tmp_path / "cut.xplane.pb.gz"
    packed = gzip.compress(src)
    path.write_bytes(packed[: len(packed) // 2])
    res = run_cli("summarize", str(path), env={})
    _assert_refused(res, path, "corrupt or truncated gzip data")


def _db_gz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A real small rocpd ``.db.gz`` and an empty temp directory the reader will use."""
    db = tmp_path / "1_results.db.gz"
    db.write_bytes(gzip.compress(small_outputs(tmp_path / "small", 40)["db"].read_bytes()))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    return db, tmp


def test_full_disk_is_said_and_the_copy_removed(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A temp directory without room is not 'corrupt gzip data': the error says where the
    copy was going, and the part written is removed."""
    from parsers.rocprof import sqlite_db
    db, tmp = _db_gz(tmp_path, monkeypatch)

    def full(path: Path, dst: object) -> int:
        dst.write(b"SQLite format 3\x00")  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sqlite_db, "inflate_to", full)
    with pytest.raises(TraceInputError, match="cannot write its inflated copy in the temp "
                       r"directory \(No space left on device; set TMPDIR"):
        tracelens.load(db)
    assert list(tmp.iterdir()) == []


def test_interrupt_mid_read_removes_the_copy(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the inflated database is being read: the copy goes too."""
    from parsers.rocprof import sqlite_db
    db, tmp = _db_gz(tmp_path, monkeypatch)

    def interrupted(*args: object) -> None:
        assert len(list(tmp.iterdir())) == 1  # the copy is there while it is read
        raise KeyboardInterrupt

    monkeypatch.setattr(sqlite_db, "check_integrity", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tracelens.load(db)
    assert list(tmp.iterdir()) == []
