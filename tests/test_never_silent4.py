"""Never silent, round four (issue 57): copies read twice, SQLite journals ignored, false
refusals, outputs that replaced what was not theirs, duplicated lines. Each case here read
silently (doubled, empty, refused or clobbered) before.

Inputs are writer-made (``tracelens_dev.writers``) from the bundled MI300X sample, the bundled
XSpace samples, or real traces of ``shared/traces`` (skipped when absent)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import tracelens
from tests.conftest import SAMPLES, cli
from tests.test_bad_input_silent import made, source  # noqa: F401  (fixtures)
from tracelens.core.model import Trace

XSPACE = SAMPLES / "h100_8gpu_moe_ddp.xplane.pb"
TPU = SAMPLES / "tpu" / "multi.xplane.pb"


def _warned(trace: Trace, *words: str) -> str:
    hit = [w for w in trace.meta.warnings if all(x in w for x in words)]
    assert hit, trace.meta.warnings
    return hit[0]


def _shape(trace: Trace) -> tuple[int, int, int]:
    """(hosts, devices, device events): what a doubled read doubles."""
    return (trace.devices["host"].n_unique(), trace.devices.height, trace.events.height)


# ---- item 1: byte-identical copies are one file ------------------------------------------

def _with_copy(src: Path, tmp: Path, copy_name: str, name: str | None = None) -> Path:
    """A folder holding ``src`` (as ``name``; with its sibling CSV tables) and a renamed
    copy of it."""
    d = tmp / "job"
    if src.name.endswith(".csv"):
        shutil.copytree(src.parent, d)
        prefix = src.name[: -len("kernel_trace.csv")]
        for p in list(d.iterdir()):  # the whole CSV set again under another prefix
            if p.name.startswith(prefix):
                shutil.copy(p, d / (copy_name + p.name[len(prefix):]))
    else:
        d.mkdir()
        shutil.copy(src, d / (name or src.name))
        shutil.copy(src, d / copy_name)
    return d


@pytest.mark.parametrize("kind, copy_name", [
    ("xspace", "copy.xplane.pb"), ("tpu", "copy.xplane.pb"),
    ("kineto", "copy_rank.json"), ("json", "999_results.json"),
    ("csv", "999_"), ("rocpd", "999_results.db"), ("rpd", "copy.rpd")])
def test_a_copy_beside_a_trace_is_read_once_and_said(kind: str, copy_name: str,
                                                       made: dict[str, Path],  # noqa: F811
                                                       tmp_path: Path) -> None:
    src = {"xspace": XSPACE, "tpu": TPU}.get(kind) or made[kind]
    alone = tracelens.load(src)
    named = {"json": "1_results.json", "rocpd": "1_results.db"}.get(kind)
    both = tracelens.load(_with_copy(src, tmp_path, copy_name, named))
    assert _shape(both) == _shape(alone)
    _warned(both, "byte-identical", "read once")


def test_a_file_given_by_two_paths_is_read_once(tmp_path: Path) -> None:
    link = tmp_path / "link.xplane.pb"
    link.symlink_to(XSPACE)
    trace = tracelens.load([XSPACE, link])
    assert _shape(trace) == _shape(tracelens.load(XSPACE))
    _warned(trace, "byte-identical", str(link))


def test_files_that_differ_are_all_read(tmp_path: Path) -> None:
    """Same size, same first MiB, one byte apart at the end: two files, no copy note."""
    from tracelens.loading.paths.copies import drop_copies

    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    body = bytes(range(256)) * 8192  # 2 MiB
    a.write_bytes(body)
    b.write_bytes(body[:-1] + b"\x00")
    assert drop_copies([a, b]) == ([a, b], [])
    c = tmp_path / "c.bin"
    c.write_bytes(body)
    kept, notes = drop_copies([a, b, c])
    assert kept == [a, b] and len(notes) == 1 and notes[0].get("copies") == str(c)


def test_a_copy_is_said_by_summarize(tmp_path: Path) -> None:
    d = _with_copy(XSPACE, tmp_path, "copy.xplane.pb")
    res = cli("summarize", str(d), "--format", "json")
    assert res.returncode == 0, res.stderr
    import json

    out = json.loads(res.stdout)
    assert any("byte-identical" in w for w in out["warnings"]), out["warnings"]


# ---- item 4: SQLite read as SQLite reads it (WAL, hot journal), nothing written beside ----

def _wal_copy(db: Path, dst: Path) -> Path:
    """``db`` copied into a WAL-mode database at ``dst`` whose rows all sit in its ``-wal``
    file: the files are copied away while the writer is still open (closing would checkpoint
    them into the database file)."""
    import sqlite3

    work = dst.parent / "work"
    work.mkdir()
    live = work / dst.name
    out = sqlite3.connect(live)
    out.execute("PRAGMA journal_mode=WAL")
    out.execute("PRAGMA wal_autocheckpoint=0")
    src = sqlite3.connect(db)
    src.backup(out)
    src.close()
    shutil.copyfile(live, dst)
    shutil.copyfile(live.with_name(live.name + "-wal"), dst.with_name(dst.name + "-wal"))
    out.close()
    return dst


def _kernel_rows(db: Path) -> int:
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        name = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND (name "
                           "LIKE 'rocpd_kernel_dispatch%' OR name = 'rocpd_op')").fetchone()[0]
        return int(con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize("kind, name", [("rocpd", "1_results.db"), ("rpd", "trace.rpd")])
def test_rows_committed_only_in_the_wal_are_read(kind: str, name: str,
                                                 made: dict[str, Path],  # noqa: F811
                                                 tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    db = _wal_copy(made[kind], tmp_path / "in" / name)
    assert (db.stat().st_size < made[kind].stat().st_size
            and db.with_name(name + "-wal").stat().st_size > 0)  # the rows are in the log
    before = sorted(p.name for p in db.parent.iterdir())
    trace = tracelens.load(db)
    assert _shape(trace) == _shape(tracelens.load(made[kind]))
    assert trace.events.height > 0
    assert sorted(p.name for p in db.parent.iterdir()) == before  # nothing written beside


@pytest.mark.parametrize("kind, name", [("rocpd", "1_results.db"), ("rpd", "trace.rpd")])
def test_a_hot_rollback_journal_is_rolled_back_in_a_copy(kind: str, name: str,
                                                         made: dict[str, Path],  # noqa: F811
                                                         tmp_path: Path) -> None:
    """A writer killed mid-transaction leaves its changes in the database file and the old
    pages in ``-journal``: SQLite reads the old pages (the last commit); so does tracelens,
    in a copy, leaving the input and its journal as they were."""
    import subprocess
    import sys

    (tmp_path / "in").mkdir()
    db = tmp_path / "in" / name
    shutil.copyfile(made[kind], db)
    crash = ("import os, sqlite3, sys\n"
             "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
             "con.execute('PRAGMA cache_size=1')\n"
             "con.execute('BEGIN')\n"
             "for (t,) in con.execute(\"SELECT name FROM sqlite_master WHERE type='table' "
             "AND name NOT LIKE 'sqlite_%'\").fetchall():\n"
             "    con.execute(f'DELETE FROM \"{t}\"')\n"
             "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", crash, str(db)], check=True)
    journal = db.with_name(name + "-journal")
    assert journal.stat().st_size > 0  # hot: the torn file needs it
    stamp = (db.read_bytes(), journal.read_bytes())
    trace = tracelens.load(db)
    assert _shape(trace) == _shape(tracelens.load(made[kind]))
    assert (db.read_bytes(), journal.read_bytes()) == stamp  # input untouched
    assert _kernel_rows(made[kind]) > 0


# ---- item 6: false refusals (BOM, a leading unknown protobuf field, a lone surrogate) -----

def _text(path: Path) -> bytes:
    import gzip

    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


@pytest.mark.parametrize("kind", ["kineto", "json", "csv"])
def test_a_utf8_bom_before_the_text_is_read(kind: str, made: dict[str, Path],  # noqa: F811
                                            tmp_path: Path) -> None:
    import gzip

    src = made[kind]
    if kind == "csv":
        d = tmp_path / "csv"
        shutil.copytree(src.parent, d)
        for p in d.glob("*.csv"):
            p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
        bom = d / src.name
    else:
        bom = tmp_path / ("1_results.json" if kind == "json" else "rank0.json")
        bom.write_bytes(b"\xef\xbb\xbf" + _text(src))
    assert _shape(tracelens.load(bom)) == _shape(tracelens.load(src))
    if kind != "csv":
        gz = bom.with_name(bom.name + ".gz")
        gz.write_bytes(gzip.compress(bom.read_bytes()))
        assert _shape(tracelens.load(gz)) == _shape(tracelens.load(src))


def test_an_unknown_leading_protobuf_field_is_skipped(tmp_path: Path) -> None:
    """A field of a newer XSpace schema written before the planes (field 15 varint 1, field
    99 bytes "hi"): protobuf skips unknown fields, wherever they are."""
    path = tmp_path / "x.xplane.pb"
    path.write_bytes(b"\x78\x01" + bytes([0x9a, 0x06, 2]) + b"hi" + XSPACE.read_bytes())
    assert _shape(tracelens.load(path)) == _shape(tracelens.load(XSPACE))
    (tmp_path / "junk.xplane.pb").write_bytes(b"\xff\xff\xff\xff\xff\xff garbage")
    res = cli("summarize", str(tmp_path / "junk.xplane.pb"))  # still refused: not protobuf
    assert res.returncode == 2 and "not an XSpace protobuf" in res.stderr, res.stderr


@pytest.mark.parametrize("kind", ["kineto", "json"])
def test_a_lone_surrogate_in_a_name_is_replaced_and_said(kind: str,
                                                         made: dict[str, Path],  # noqa: F811
                                                         tmp_path: Path) -> None:
    src = made[kind]
    text = _text(src)
    alone = tracelens.load(src)
    name = alone.events["name"][0]
    token = name.encode()
    assert token in text
    hurt = tmp_path / ("1_results.json" if kind == "json" else "rank0.json")
    hurt.write_bytes(text.replace(token, b"\\ud800" + token))
    trace = tracelens.load(hurt)
    assert _shape(trace) == _shape(alone)
    assert ("\ufffd" + name) in set(trace.events["name"].to_list())
    _warned(trace, "lone UTF-16 surrogate", "U+FFFD")


# ---- item 7: outputs replace only regular files, and say so ------------------------------

MI300X = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process with a short timeout: a write that opens a FIFO blocks
    forever, which must fail the test, not hang it."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "tracelens.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)


def _one_line(res: subprocess.CompletedProcess[str], path: Path, *words: str) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), res.stderr
    assert all(w in lines[0] for w in words), lines[0]


@pytest.mark.parametrize("command", [
    ("export", "--table", "kernels", "-o"), ("export", "--perfetto"), ("report", "-o"),
    ("critical-path", "--perfetto")])
def test_a_fifo_at_the_output_path_is_refused_not_opened(command: tuple[str, ...],
                                                         tmp_path: Path) -> None:
    import os
    import stat

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    res = _run(command[0], str(MI300X), *command[1:], str(fifo))
    _one_line(res, fifo, "FIFO", "not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no .part left


def test_a_link_out_of_the_output_folder_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "other").mkdir()
    target = tmp_path / "other" / "precious.csv"
    target.write_text("keep me\n")
    link = tmp_path / "out" / "k.csv"
    link.symlink_to(target)
    res = cli("export", str(MI300X), "--table", "kernels", "-o", str(link))
    _one_line(res, link, "link out of its folder")
    assert link.is_symlink() and target.read_text() == "keep me\n"


def test_a_replaced_file_is_said(tmp_path: Path) -> None:
    out = tmp_path / "k.csv"
    res = cli("export", str(MI300X), "--table", "kernels", "-o", str(out))
    assert res.returncode == 0 and "note: replaced" not in res.stderr, res.stderr
    res = cli("export", str(MI300X), "--table", "kernels", "-o", str(out))
    assert res.returncode == 0 and f"note: replaced {out}" in res.stderr, res.stderr


def test_html_and_history_outputs_refuse_a_fifo(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)
    res = _run("compare", str(MI300X), str(MI300X), "--html", str(fifo))
    _one_line(res, fifo, "FIFO")
    store = tmp_path / "runs.db"
    assert cli("history", "add", str(MI300X), "--store", str(store)).returncode == 0
    (tmp_path / "pq").mkdir()
    os.mkfifo(tmp_path / "pq" / "runs.parquet")
    res = _run("history", "export", "--store", str(store), "-o", str(tmp_path / "pq"))
    _one_line(res, tmp_path / "pq" / "runs.parquet", "FIFO")


# ---- item 5: lines lost or counted twice --------------------------------------------------

def _edit_space(src: Path, tmp: Path, edit: object) -> Path:
    from parsers.xplane_schema import xspace_class

    space = xspace_class()()
    space.ParseFromString(src.read_bytes())
    edit(space)  # type: ignore[operator]
    out = tmp / src.name
    out.write_bytes(space.SerializeToString())
    return out


def _copy_line(plane: object, name: str | None = None, same_id: bool = False) -> None:
    """The plane's first line (named ``name``, else the first with events) added again,
    under a new line id unless ``same_id``."""
    lines = plane.lines  # type: ignore[attr-defined]
    line = next(ln for ln in lines if (ln.name == name if name else len(ln.events)))
    new = lines.add()
    new.CopyFrom(line)
    if not same_id:
        new.id = _new_id(lines)


def _new_id(lines: object) -> int:
    """A line id no line of the plane has (TPU line ids reach 2^63-1)."""
    ids = {ln.id for ln in lines}  # type: ignore[attr-defined]
    return next(i for i in range(1000, 2000) if i not in ids)


def _first_plane(space: object, prefix: str) -> object:
    return next(p for p in space.planes if p.name.startswith(prefix))  # type: ignore


@pytest.mark.parametrize("src, plane, line, same_id", [
    (XSPACE, "/device:GPU:", None, False), (XSPACE, "/device:GPU:", None, True),
    (TPU, "/device:TPU:", "XLA Ops", False), (TPU, "/device:TPU:", "Async XLA Ops", False),
    (TPU, "/device:TPU:", "XLA Ops", True)])
def test_a_line_held_twice_is_read_once_and_counted(src: Path, plane: str, line: str | None,
                                                    same_id: bool, tmp_path: Path) -> None:
    hurt = _edit_space(src, tmp_path, lambda s: _copy_line(_first_plane(s, plane), line,
                                                           same_id))
    trace, alone = tracelens.load(hurt), tracelens.load(src)
    assert _shape(trace) == _shape(alone)
    assert trace.steps.height == alone.steps.height
    _warned(trace, "read once what the file holds twice")


def test_xla_cpu_host_thread_lines_held_twice_are_read_once() -> None:
    from tests.conftest import CPU_TRACE, real_trace

    src = real_trace(CPU_TRACE)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        def edit(space: object) -> None:
            host = _first_plane(space, "/host:CPU")
            busy = sorted(host.lines, key=lambda ln: -len(ln.events))  # type: ignore
            for ln in busy[:2]:  # the two busiest threads: one under a new id, one same id
                new = host.lines.add()  # type: ignore[attr-defined]
                new.CopyFrom(ln)
            new.id = _new_id(host.lines)  # type: ignore[attr-defined]
        hurt = _edit_space(src, Path(d), edit)
        trace, alone = tracelens.load(hurt), tracelens.load(src)
        assert _shape(trace) == _shape(alone)
        _warned(trace, "read once what the file holds twice")


def test_a_tpu_plane_without_its_xla_ops_line_is_said(tmp_path: Path) -> None:
    def edit(space: object) -> None:
        plane = _first_plane(space, "/device:TPU:")
        keep = [ln for ln in plane.lines if ln.name != "XLA Ops"]  # type: ignore
        del plane.lines[:]  # type: ignore[attr-defined]
        plane.lines.extend(keep)  # type: ignore[attr-defined]
    trace = tracelens.load(_edit_space(TPU, tmp_path, edit))
    _warned(trace, "no 'XLA Ops' line", "only its")


def test_kineto_kernels_with_dur_0_are_counted(made: dict[str, Path],  # noqa: F811
                                               tmp_path: Path) -> None:
    import json

    doc = json.loads(_text(made["kineto"]))
    n = 0
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel" and ev.get("ph") == "X":
            ev["dur"] = 0
            n += 1
    assert n > 100
    hurt = tmp_path / "rank0.json"
    hurt.write_text(json.dumps(doc))
    said = _warned(tracelens.load(hurt), "have dur 0")
    assert f"({n} kernels)" in said
    assert not [w for w in tracelens.load(made["kineto"]).meta.warnings if "dur 0" in w]


def test_kineto_with_traceevents_twice_is_refused(made: dict[str, Path],  # noqa: F811
                                                  tmp_path: Path) -> None:
    text = _text(made["kineto"]).decode()
    assert text.rstrip().endswith("}")
    hurt = tmp_path / "rank0.json"
    hurt.write_text(text.rstrip()[:-1] + ', "traceEvents": []}')
    res = cli("summarize", str(hurt))
    _one_line(res, hurt, "'traceEvents' 2 times")


# ---- item 3: entries that look like part of the job and cannot be read -------------------

def _log_dir(tmp: Path) -> Path:
    """The bundled two-host straggler job as a log dir per host (p0/, p1/)."""
    src = SAMPLES / "mi355x_2x8gpu_straggler"
    hosts = sorted(src.rglob("*.xplane.pb"))
    for i, f in enumerate(hosts):
        d = tmp / "logs" / f"p{i}" / f.relative_to(src).parent
        d.mkdir(parents=True)
        shutil.copy(f, d / f.name)
    assert tracelens.load(tmp / "logs").devices["host"].n_unique() == 2
    return tmp / "logs"


def test_a_fifo_named_like_a_host_file_is_an_error(tmp_path: Path) -> None:
    import os

    logs = _log_dir(tmp_path)
    host1 = next((logs / "p1").rglob("*.xplane.pb"))
    host1.unlink()
    os.mkfifo(host1)
    res = _run("summarize", str(logs))
    _one_line(res, host1, "FIFO", "not read in part")


def test_a_folder_that_cannot_be_listed_is_an_error(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod 000 does not stop root, so the refusal to list is the OS's answer faked."""
    import os

    logs = _log_dir(tmp_path)
    real = os.scandir

    def scandir(path: object) -> object:
        if Path(str(path)).name == "p1":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)  # type: ignore[arg-type]
    monkeypatch.setattr(os, "scandir", scandir)
    res = cli("summarize", str(logs))
    _one_line(res, logs / "p1", "cannot list the folder", "Permission denied")


# ---- item 8 (part): what a refusal or the help says ---------------------------------------

def test_xcheck_on_a_tpu_trace_is_refused_with_the_reason() -> None:
    """XProf's kernel_stats is GPU only: on a TPU trace every op was "not agreeing" (exit 1,
    "0 of 802 kernels agree")."""
    res = cli("xcheck", str(SAMPLES / "tpu" / "flash.xplane.pb"))
    _one_line(res, SAMPLES / "tpu" / "flash.xplane.pb", "GPU kernels only", "TPU")


def test_a_folder_of_nsight_output_says_so(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.nsys-rep").write_bytes(b"\x00" * 64)
    (tmp_path / "out" / "kernels.parquet").write_bytes(b"PAR1")
    res = cli("summarize", str(tmp_path))
    _one_line(res, tmp_path, "holds no trace files", "Nsight Systems report",
              "out/report.nsys-rep")


def test_help_names_every_input_format() -> None:
    out = cli("--help").stdout
    assert all(w in out for w in ("XSpace", "TPU", "Kineto", "rocprofv3", "rpd_tracer")), out


def test_history_reads_a_store_in_a_read_only_folder_and_writes_nothing_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A WAL store whose last run is still in its -wal (copied while its writer was open),
    in a folder the process may not write (root may write anything: the folder is said to be
    read-only as os.access says it for another user). list reads every run and leaves the
    folder as it was: no -shm created, the -wal not checkpointed into the store."""
    import hashlib
    import json
    import os
    import sqlite3

    from tracelens.history import store as st

    work = tmp_path / "work"
    work.mkdir()
    live = work / "runs.db"
    for label, trace in (("a", MI300X), ("b", SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb")):
        assert cli("history", "add", str(trace), "--store", str(live), "--label",
                   label).returncode == 0
    keep = sqlite3.connect(live)  # an open reader keeps the next add's log in the -wal
    keep.execute("PRAGMA wal_autocheckpoint=0")
    keep.execute("SELECT count(*) FROM runs").fetchone()
    ro = tmp_path / "ro"
    ro.mkdir()
    assert cli("history", "add", str(SAMPLES / "h100_8gpu_moe_ddp.xplane.pb"), "--store",
               str(live), "--label", "c").returncode == 0
    for f in work.iterdir():
        if f.name.endswith(("runs.db", "-wal")):
            shutil.copyfile(f, ro / f.name)
    keep.close()
    assert (ro / "runs.db-wal").stat().st_size > 0
    stamp = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in ro.iterdir()}
    real = os.access
    monkeypatch.setattr(st.os, "access", lambda path, mode, **kw: False if (
        mode == os.W_OK and Path(path) in (ro, ro / "runs.db")) else real(path, mode, **kw))
    res = cli("history", "list", "--store", str(ro / "runs.db"), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert [r["label"] for r in json.loads(res.stdout)] == ["a", "b", "c"]
    assert {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in ro.iterdir()} == stamp
