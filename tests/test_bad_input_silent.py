"""Never silent, round three (issue 46, item 4): inputs that read short, empty or doubled
with exit 0 and no word, a traceback, and bounds checked only after a bulk read. Each case
here read silently (or crashed) before: it is now refused in one line or said in a warning.

Inputs are writer-made (``tracelens_dev.writers``) from the bundled MI300X sample, or the
bundled XSpace samples edited as protobuf messages; large files are sparse (``truncate``,
no disk used)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Callable

import polars as pl
import pytest
from google.protobuf.internal.decoder import _DecodeVarint

import tracelens
from parsers.xplane_schema import xspace_class
from tests.conftest import SAMPLES, cli, real_rocprof
from tests.test_inflation import _assert_refused, run_cli, run_measured
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Trace

XSPACE = SAMPLES / "h100_8gpu_moe_ddp.xplane.pb"


@pytest.fixture(scope="module")
def source() -> Trace:
    return tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")


@pytest.fixture(scope="module")
def made(source: Trace, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One writer-made file of each rocprofv3 form, RPD and Kineto, from the same trace."""
    from tracelens_dev.writers import kineto
    from tracelens_dev.writers.rocprof import write_csv, write_json, write_rocpd, write_rpd

    d = tmp_path_factory.mktemp("made")
    csv = [p for p in write_csv(source, d / "csv") if p.name.endswith("_kernel_trace.csv")]
    return {"json": write_json(source, d / "json" / "x.json")[0],
            "rocpd": write_rocpd(source, d / "rocpd" / "x.db")[0],
            "rpd": write_rpd(source, d / "rpd" / "trace.rpd")[0],
            "csv": csv[0], "kineto": kineto.write(source, d / "kineto")[0]}


def _copy_dir(src: Path, tmp: Path, name: str) -> Path:
    """``src`` copied into a fresh folder of ``tmp`` (a CSV with its sibling tables)."""
    dst = tmp / name
    if src.name.endswith(".csv"):
        shutil.copytree(src.parent, dst)
    else:
        dst.mkdir()
        shutil.copy(src, dst / src.name)
    return dst / src.name


def _warned(trace: Trace, *words: str) -> str:
    hit = [w for w in trace.meta.warnings if all(x in w for x in words)]
    assert hit, trace.meta.warnings
    return hit[0]


# ---- XSpace: silent partial results -------------------------------------------------------

def _edited(tmp: Path, edit: Callable[[Any], None], name: str = "x.xplane.pb") -> Path:
    space = xspace_class()()
    space.ParseFromString(XSPACE.read_bytes())
    edit(space)
    path = tmp / name
    path.write_bytes(space.SerializeToString())
    return path


def _devices(space: Any) -> list[Any]:
    return [p for p in space.planes if p.name.startswith("/device:GPU:")]


def test_device_planes_of_one_name_are_refused(tmp_path: Path) -> None:
    """Eight planes all named ``/device:GPU:0`` were read as one device (busy -56%, steps
    multiplied): a plane's name is its device's only identity, so the file is refused."""
    def same(space: Any) -> None:
        for p in _devices(space):
            p.name = "/device:GPU:0"
    path = _edited(tmp_path, same)
    with pytest.raises(TraceInputError, match="are both named '/device:GPU:0'"):
        tracelens.load(path)


def test_device_planes_without_names_are_counted(tmp_path: Path) -> None:
    """Device planes whose names were emptied dropped every kernel unsaid: their events are
    counted, and the file says it gave no device activity."""
    whole = tracelens.load(XSPACE)

    def unnamed(space: Any) -> None:
        for p in _devices(space):
            p.name = ""
    trace = tracelens.load(_edited(tmp_path, unnamed))
    assert trace.events.height == 0
    _warned(trace, f"ignored {whole.events.height} events on 8 plane(s) without a name")
    _warned(trace, "no device activity")


def test_planes_without_stat_metadata_are_said(tmp_path: Path) -> None:
    """Without ``stat_metadata`` no stat can be named (steps, correlation ids, kernel details
    are lost): said, naming the planes."""
    def strip(space: Any) -> None:
        for p in space.planes:
            p.ClearField("stat_metadata")
    trace = tracelens.load(_edited(tmp_path, strip))
    _warned(trace, "9 plane(s) with events define no stat metadata", "/device:GPU:0")


def _top_fields(raw: bytes) -> list[tuple[int, int, int]]:
    """(field number, start, end) of each top-level field of a serialized message."""
    at, out = 0, []
    while at < len(raw):
        start = at
        key, at = _DecodeVarint(raw, at)
        n, at = _DecodeVarint(raw, at)
        at += n
        out.append((key >> 3, start, at))
    return out


def test_file_cut_at_a_plane_boundary_is_said(tmp_path: Path) -> None:
    """Cut after its fifth device plane, the file is valid protobuf and read 5 of 8 devices
    unsaid: what a complete XProf file holds after its device planes is missing, and said."""
    raw = XSPACE.read_bytes()
    fields = _top_fields(raw)
    assert [f for f, _, _ in fields[:6]] == [1] * 6  # /host:metadata, then 5 device planes
    path = tmp_path / "cut.xplane.pb"
    path.write_bytes(raw[:fields[5][2]])
    trace = tracelens.load(path)
    assert trace.devices.height == 5
    _warned(trace, "lacks what a complete XProf file holds", "/host:CPU plane",
            "Task Environment plane", "cut short")


def test_device_ordinals_with_gaps_are_said(tmp_path: Path) -> None:
    def drop(space: Any) -> None:
        keep = [p for p in space.planes if p.name not in ("/device:GPU:3", "/device:GPU:5")]
        del space.planes[:]
        space.planes.extend(keep)
    trace = tracelens.load(_edited(tmp_path, drop))
    assert trace.devices.height == 6
    _warned(trace, "device ordinal(s) 3, 5", "0-7 with gaps")


def test_complete_sample_is_not_warned() -> None:
    assert not [w for w in tracelens.load(XSPACE).meta.warnings
                if "complete XProf" in w or "stat metadata" in w or "without a name" in w]


# ---- Kineto: every unrecognised category counted ------------------------------------------

def test_kineto_unknown_categories_are_counted(made: dict[str, Path], tmp_path: Path) -> None:
    """14 kernels whose ``cat`` is ``"KERNEL"`` vanished while a missing cat was counted.
    A known category in another case is counted, not read (categories are case-sensitive and
    no Kineto writes it; reading it would guess), and the notice says which one it resembles."""
    base = tracelens.load(made["kineto"])
    doc = json.loads(made["kineto"].read_text())
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for e in kernels[:14]:
        e["cat"] = "KERNEL"
    kernels[14]["cat"] = "my_kernels"
    del kernels[15]["cat"]
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps(doc))
    trace = tracelens.load(path)
    assert trace.events.height == base.events.height - 16
    _warned(trace, "skipped 15 complete events of categories this reader does not know",
            "'KERNEL' 14 (not 'kernel': categories are case-sensitive)", "'my_kernels' 1")
    _warned(trace, "skipped 1 complete events (ph 'X') without a cat")


def test_kineto_known_unused_categories_are_not_counted(made: dict[str, Path]) -> None:
    from parsers.kineto.checks import KNOWN_UNUSED
    assert "python_function" in KNOWN_UNUSED and "Trace" in KNOWN_UNUSED
    trace = tracelens.load(made["kineto"])
    assert not [w for w in trace.meta.warnings if "does not know" in w]


# ---- rocprofv3 and RPD: silent empty ------------------------------------------------------

@pytest.mark.parametrize("value", [[], None])
def test_rocprof_json_without_dispatches_says_so(made: dict[str, Path], tmp_path: Path,
                                                 value: Any) -> None:
    doc = json.loads(made["json"].read_text())
    doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"] = value
    doc["rocprofiler-sdk-tool"][0]["buffer_records"]["memory_copy"] = []
    path = tmp_path / "1_results.json"
    path.write_text(json.dumps(doc))
    trace = tracelens.load(path)
    assert trace.events.height == 0
    _warned(trace, "1_results.json: no device activity")


def _sql(path: Path, *statements: str) -> Path:
    con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return path


def _table(path: Path, base: str) -> str:
    con = sqlite3.connect(path)
    name = next(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = "
                                          "'table'") if r[0].startswith(base))
    con.close()
    return name


def test_empty_databases_say_so(made: dict[str, Path], tmp_path: Path) -> None:
    db = _copy_dir(made["rocpd"], tmp_path, "rocpd")
    _sql(db, f'DELETE FROM "{_table(db, "rocpd_kernel_dispatch")}"',
         f'DELETE FROM "{_table(db, "rocpd_memory_copy")}"')
    rpd = _sql(_copy_dir(made["rpd"], tmp_path, "rpd"), "DELETE FROM rocpd_op")
    for path in (db, rpd):
        trace = tracelens.load(path)
        assert trace.events.height == 0
        _warned(trace, f"{path.name}: no device activity")


def test_header_only_csvs_say_so(made: dict[str, Path], tmp_path: Path) -> None:
    kern = _copy_dir(made["csv"], tmp_path, "kern")
    kern.write_text(kern.read_text().splitlines()[0] + "\n")
    counters = tmp_path / "counters" / "1_counter_collection.csv"
    counters.parent.mkdir()
    real = real_rocprof("counters_gfx1151/decode_stall_counter_collection.csv")
    counters.write_text(real.read_text().splitlines()[0] + "\n")
    for path in (kern, counters):
        trace = tracelens.load(path)
        assert trace.events.height == 0
        _warned(trace, f"{path.name}: no device activity")


# ---- rocprofv3 and RPD: silent doubled ----------------------------------------------------

def test_a_process_twice_in_one_json_is_read_once(made: dict[str, Path],
                                                  tmp_path: Path) -> None:
    base = tracelens.load(made["json"])
    doc = json.loads(made["json"].read_text())
    doc["rocprofiler-sdk-tool"].append(doc["rocprofiler-sdk-tool"][0])
    path = tmp_path / "1_results.json"
    path.write_text(json.dumps(doc))
    trace = tracelens.load(path)
    assert trace.events.height == base.events.height
    assert trace.devices.height == base.devices.height
    _warned(trace, "appears more than once with the same records: read once")


def _dup_json(src: Path, tmp: Path) -> Path:
    doc = json.loads(src.read_text())
    records = doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
    records += records[:10]
    path = tmp / "1_results.json"
    path.write_text(json.dumps(doc))
    return path


def _dup_csv(src: Path, tmp: Path) -> Path:
    path = _copy_dir(src, tmp, "csv")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + lines[1:11]))
    return path


def _dup_rocpd(src: Path, tmp: Path) -> Path:
    path = _copy_dir(src, tmp, "rocpd")
    table = _table(path, "rocpd_kernel_dispatch")
    con = sqlite3.connect(path)
    cols = ", ".join(f'"{r[1]}"' for r in con.execute(f'PRAGMA table_info("{table}")')
                     if r[1] != "id")
    con.close()
    return _sql(path, f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM "{table}" LIMIT 10')


def _dup_rpd(src: Path, tmp: Path) -> Path:
    path = _copy_dir(src, tmp, "rpd")
    con = sqlite3.connect(path)
    cols = ", ".join(f'"{r[1]}"' for r in con.execute("PRAGMA table_info(rocpd_op)")
                     if r[1] != "id")
    con.close()
    return _sql(path, f"INSERT INTO rocpd_op ({cols}) SELECT {cols} FROM rocpd_op "
                "WHERE opType_id IN (SELECT id FROM rocpd_string WHERE string = "
                "'KernelExecution') LIMIT 10")


@pytest.mark.parametrize("form, dup", [("json", _dup_json), ("csv", _dup_csv),
                                       ("rocpd", _dup_rocpd), ("rpd", _dup_rpd)])
def test_duplicated_records_are_dropped_and_counted(made: dict[str, Path], tmp_path: Path,
                                                    form: str, dup: Callable) -> None:
    """Ten dispatches written twice doubled ten kernel counts unsaid, in every form."""
    base = tracelens.load(made[form])
    trace = tracelens.load(dup(made[form], tmp_path))
    assert trace.events.height == base.events.height
    assert trace.events["name"].value_counts().sort("name").equals(
        base.events["name"].value_counts().sort("name"))
    _warned(trace, "dropped 10", "repeat an earlier record field for field")


def test_two_processes_with_equal_ops_stay_two(source: Trace, tmp_path: Path) -> None:
    """What is not a copy stays: the writer's two ranks of equal ops, each linked to its own
    calls, are two processes of the same count (not dropped as copies)."""
    from tracelens_dev.writers.rocprof import write_rpd
    two = Trace(events=pl.concat([source.events,
                                  source.events.with_columns(rank=pl.lit(1, pl.Int32))]),
                host_events=source.host_events, steps=source.steps,
                devices=pl.concat([source.devices,
                                   source.devices.with_columns(rank=pl.lit(1, pl.Int32))]),
                meta=source.meta)
    path = write_rpd(two, tmp_path / "two.rpd")[0]
    trace = tracelens.load(path)
    assert trace.events.height == 2 * source.events.height
    assert not [w for w in trace.meta.warnings if "repeat an earlier record" in w]


# ---- a traceback: collectives on a folder with a part without collectives ----------------

def test_collectives_on_a_mixed_folder_with_an_empty_part(made: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """A trace beside an RPD database with no ops (a Kineto file then; an RPD one now, as
    files of two profilers are two jobs): ``collectives`` failed with
    ``SchemaError: type Categorical is incompatible with expected type String`` (the empty
    part's ``type`` column); ``summarize`` and ``report`` worked."""
    folder = tmp_path / "job"
    folder.mkdir()
    # two rpd_tracer files (files of different profilers are different jobs since issue 57)
    shutil.copy(made["rpd"], folder / "rank-0.rpd")
    shutil.copy(made["rpd"], folder / "trace.rpd")
    _sql(folder / "trace.rpd", "DELETE FROM rocpd_op")
    res = cli("collectives", str(folder))
    assert res.returncode == 0, res.stderr
    assert "all-gather" in res.stdout and "reduce-scatter" in res.stdout


def test_partial_of_no_collectives_has_the_same_types(source: Trace) -> None:
    from tracelens.analyze.communication.collectives import partial_activities
    full = partial_activities(source.events)
    empty = partial_activities(source.events.clear())
    assert full.height and empty.height == 0
    assert empty.schema == full.schema


# ---- bounds: refused from the size and first bytes, before any bulk read -----------------

def test_sparse_kernel_trace_csv_is_refused_unread(made: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """A 3 GiB sparse ``kernel_trace.csv`` (its header, then zero bytes) aborted the process
    in polars' CSV reader (``memory allocation of 2147438304 bytes failed``, SIGABRT)."""
    path = tmp_path / "1_kernel_trace.csv"
    with open(path, "wb") as fh:
        fh.write(made["csv"].read_text().splitlines()[0].encode() + b"\n")
        fh.truncate(3 << 30)
    res = run_cli("summarize", str(path), env={})
    _assert_refused(res, path, "not CSV text")


def test_sparse_json_with_text_at_both_ends_is_refused_unread(tmp_path: Path) -> None:
    """Text at both ends and a hole between them: refused from the file's layout."""
    path = tmp_path / "rank0.pt.trace.json"
    head = b'{"schemaVersion": 1, "traceEvents": ['
    with open(path, "wb") as fh:
        fh.write(head + b" " * ((1 << 20) - len(head)))
        fh.seek(3 << 30)
        fh.write(b" " * (1 << 20) + b"]}")
    res, rss = run_measured(path, "8G")
    _assert_refused(res, path, "a hole", "not JSON text")
    assert rss < 500 << 20


def test_sparse_xplane_is_refused_unread(tmp_path: Path) -> None:
    """A 3 GiB sparse ``.xplane.pb`` (a real file's first bytes, then zeros) was refused only
    after reading it all (13.8 s, 3.2 GB): now from its size, holding next to nothing."""
    path = tmp_path / "host.xplane.pb"
    with open(path, "wb") as fh:
        fh.write(XSPACE.read_bytes()[:4096])
        fh.truncate(3 << 30)
    res, rss = run_measured(path, "8G")
    _assert_refused(res, path, "3.0 GiB", "cannot be decoded by protobuf")
    assert rss < 500 << 20


def test_rpd_whose_op_table_is_a_view_says_so(made: dict[str, Path], tmp_path: Path) -> None:
    """Refused as "not a rocprofv3 rocpd database" before: the error now names the view."""
    path = _copy_dir(made["rpd"], tmp_path, "rpd")
    _sql(path, "ALTER TABLE rocpd_op RENAME TO op_rows",
         "CREATE VIEW rocpd_op AS SELECT * FROM op_rows")
    with pytest.raises(TraceInputError, match="rocpd_op is a view, not a table"):
        tracelens.load(path)
