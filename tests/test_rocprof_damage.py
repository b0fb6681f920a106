"""Damage is never silent, hostile content stays bounded (issue 25 items 12b and 12c).

Each file is one our writers make, with one targeted piece of damage: a damaged b-tree, a JSON
container of the wrong type, INT64 extreme timestamps, repeated agent rows, a second set of
rocpd tables, a view named like a table whose query never ends. Each is either refused with
one line or read with every dropped record counted by reason; never a partial result
presented as whole, never a hang.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import tracelens
from tests.conftest import SAMPLES
from tests.test_rocprof_mutation import _tables, _unconstrained, small_outputs
from tracelens.core.errors import TraceInputError
from tracelens_dev.writers.rocprof import write_rocpd

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return small_outputs(tmp_path_factory.mktemp("damage"), 200)


def _copy(src: Path, tmp: Path) -> Path:
    out = tmp / src.name
    out.write_bytes(src.read_bytes())
    return out


def _span(trace: tracelens.Trace) -> int:
    return int(trace.events["end_ns"].max() - trace.events["start_ns"].min())


def _base(small: dict[str, Path], kind: str) -> tracelens.Trace:
    return tracelens.load(small[kind])


# ---- rocpd: integrity ------------------------------------------------------------------

def _swap_children(path: Path, base: str, exact: bool = False) -> None:
    """Swap the first two child pointers of ``base``'s root (an interior b-tree page): every
    row is still there but out of rowid order, as a damaged disk or copy leaves it. The
    table is ``base_<uuid>``, or ``base`` itself when ``exact``."""
    con = sqlite3.connect(path)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name "
                       "LIKE ?", (base if exact else base + "_%",)).fetchone()[0]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    raw = bytearray(path.read_bytes())
    off = (root - 1) * size
    assert raw[off] == 5, "the table's root must be an interior page for this damage"
    a, b = (off + int.from_bytes(raw[off + 12 + 2 * i: off + 14 + 2 * i], "big")
            for i in range(2))
    raw[a:a + 4], raw[b:b + 4] = raw[b:b + 4], raw[a:a + 4]
    path.write_bytes(bytes(raw))


def test_damaged_btree_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "1_results.db"
    write_rocpd(tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"), path)
    _swap_children(path, "rocpd_kernel_dispatch")
    with pytest.raises(TraceInputError, match=r"damaged SQLite database \(PRAGMA "
                       r"quick_check: On tree page \d+ cell 0: Rowid \d+ out of order"):
        tracelens.load(path)


# ---- rocpd: which objects are read -----------------------------------------------------

def _uuid_tables(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                      "AND name LIKE 'rocpd_%'")]


def _second_uuid_set(con: sqlite3.Connection, distinct: bool) -> None:
    """Every uuid table copied under a second uuid; ``distinct``: with another guid (a second
    process), else an exact copy."""
    for t in _uuid_tables(con):
        other = t[:-36] + "00000000_0000_7000_8000_000000000000"
        con.execute(f'CREATE TABLE "{other}" AS SELECT * FROM "{t}"')
        if not distinct:
            continue
        if "guid" in {r[1] for r in con.execute(f'PRAGMA table_info("{other}")')}:
            con.execute(f'UPDATE "{other}" SET guid = \'other\'')
        if t.startswith("rocpd_metadata_"):
            con.execute(f"UPDATE \"{other}\" SET value = 'other' WHERE tag = 'guid'")


def test_second_set_of_uuid_tables_is_read_once(small: dict[str, Path],
                                                tmp_path: Path) -> None:
    """A copy of every table under a second uuid, and the views gone: the rows are not
    doubled (each set read once; the copy is recognised by its guid and counted)."""
    base = _base(small, "db")
    path = _copy(small["db"], tmp_path)
    con = sqlite3.connect(path)
    _second_uuid_set(con, distinct=False)
    for (v,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall():
        con.execute(f'DROP VIEW "{v}"')
    con.commit()
    con.close()
    trace = tracelens.load(path)
    assert trace.events.height == base.events.height
    assert any("2 sets of rocpd tables (one per uuid), each read once; 1 skipped as a copy"
               in w or "1 skipped as copies of another set" in w for w in trace.meta.warnings)


def test_two_distinct_sets_are_two_processes(small: dict[str, Path], tmp_path: Path) -> None:
    """Two processes merged into one database: each set read once, with its own rows."""
    base = _base(small, "db")
    path = _copy(small["db"], tmp_path)
    con = sqlite3.connect(path)
    _second_uuid_set(con, distinct=True)
    con.commit()
    con.close()
    trace = tracelens.load(path)
    assert trace.events.height == 2 * base.events.height
    assert sorted(trace.events["rank"].unique().to_list()) == [0, 1]


def _never_ending_view(path: Path) -> None:
    """The expected un-suffixed name as a view over a recursive CTE that never ends."""
    con = sqlite3.connect(path)
    con.execute('DROP VIEW "rocpd_kernel_dispatch"')
    con.execute('CREATE VIEW "rocpd_kernel_dispatch" AS WITH RECURSIVE r(id) AS '
                "(SELECT 1 UNION ALL SELECT id + 1 FROM r) SELECT id, id AS agent_id, "
                'id AS kernel_id, id AS start, id AS "end", id AS event_id FROM r')
    con.commit()
    con.close()


def test_view_named_like_a_table_is_not_read(small: dict[str, Path], tmp_path: Path) -> None:
    """Only objects of type ``table`` are read; before, the view was, and it never ended
    (the subprocess bounds the test)."""
    path = _copy(small["db"], tmp_path)
    _never_ending_view(path)
    code = ("import sys, tracelens; t = tracelens.load(sys.argv[1]); "
            "print(t.events.height)")
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, timeout=60, env={**os.environ})
    assert res.returncode == 0, res.stderr[-2000:]
    assert int(res.stdout) == _base(small, "db").events.height


def test_time_bound_on_every_statement(small: dict[str, Path], monkeypatch) -> None:
    """The progress handler is installed: with no time allowed, the read stops with one line
    saying how to allow more."""
    monkeypatch.setenv("TRACELENS_SQLITE_SECONDS", "0")
    with pytest.raises(TraceInputError, match="took more than 0 s .set "
                       "TRACELENS_SQLITE_SECONDS"):
        tracelens.load(small["db"])


# ---- repeated agents -------------------------------------------------------------------

def test_repeated_agent_rows_do_not_multiply_dispatches(small: dict[str, Path],
                                                        tmp_path: Path) -> None:
    base = _base(small, "db")
    path = _copy(small["db"], tmp_path)
    con = sqlite3.connect(path)
    (table,) = _unconstrained(con, "rocpd_info_agent")
    n = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}"')
    con.commit()
    con.close()
    trace = tracelens.load(path)
    assert trace.events.height == base.events.height
    assert trace.devices.height == base.devices.height
    assert any(f"dropped {n} agent rows that repeat an agent id" in w
               for w in trace.meta.warnings), trace.meta.warnings


def test_repeated_json_agents_do_not_multiply_dispatches(small: dict[str, Path],
                                                         tmp_path: Path) -> None:
    base = _base(small, "json")
    doc = json.loads(small["json"].read_text())
    proc = doc["rocprofiler-sdk-tool"][0]
    n = len(proc["agents"])
    proc["agents"] = proc["agents"] * 3
    path = tmp_path / "1_results.json"
    path.write_text(json.dumps(doc))
    trace = tracelens.load(path)
    assert trace.events.height == base.events.height
    assert any(f"dropped {2 * n} agent rows that repeat an agent id" in w
               for w in trace.meta.warnings), trace.meta.warnings


# ---- JSON container types --------------------------------------------------------------

@pytest.mark.parametrize("where,value,words", [
    ("buffer_records", [], "buffer_records is a JSON list, not an object"),
    ("kernel_dispatch", {}, "buffer_records.kernel_dispatch is a JSON object, not a list"),
    ("kernel_dispatch", "x", "buffer_records.kernel_dispatch is a JSON string, not a list"),
])
def test_json_container_of_the_wrong_type_is_not_an_empty_trace(
        small: dict[str, Path], tmp_path: Path, where: str, value: object, words: str) -> None:
    doc = json.loads(small["json"].read_text())
    proc = doc["rocprofiler-sdk-tool"][0]
    owner = proc if where == "buffer_records" else proc["buffer_records"]
    owner[where] = value
    for key in [k for k in proc["buffer_records"] if k not in ("kernel_dispatch",)] if (
            isinstance(proc["buffer_records"], dict)) else []:
        proc["buffer_records"][key] = []  # nothing else to read either
    path = tmp_path / "1_results.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceInputError, match="no readable kernel dispatch or memory copy"
                       rf" \({words}"):
        tracelens.load(path)


def test_json_side_container_of_the_wrong_type_is_a_warning(small: dict[str, Path],
                                                            tmp_path: Path) -> None:
    doc = json.loads(small["json"].read_text())
    doc["rocprofiler-sdk-tool"][0]["agents"] = {"not": "a list"}
    doc["rocprofiler-sdk-tool"][0]["buffer_records"]["hip_runtime_api"] = 7
    path = tmp_path / "1_results.json"
    path.write_text(json.dumps(doc))
    try:
        trace = tracelens.load(path)
    except TraceInputError as exc:  # no agents: nothing is on a GPU; refused, and says why
        assert "agents is a JSON object, not a list" in exc.problem
        return
    assert any("buffer_records.hip_runtime_api is a JSON number, not a list" in w
               for w in trace.meta.warnings)


# ---- INT64 extreme timestamps ----------------------------------------------------------

def _extreme_db(src: Path, tmp: Path) -> Path:
    path = _copy(src, tmp)
    con = sqlite3.connect(path)
    (table,) = _tables(con, "rocpd_kernel_dispatch")
    ids = [r[0] for r in con.execute(f'SELECT id FROM "{table}" ORDER BY id LIMIT 3')]
    con.execute(f'UPDATE "{table}" SET start = ? WHERE id = ?', (I64_MIN, ids[0]))
    con.execute(f'UPDATE "{table}" SET "end" = ? WHERE id = ?', (I64_MAX, ids[1]))
    con.execute(f'UPDATE "{table}" SET start = ?, "end" = ? WHERE id = ?',
                (I64_MAX - 1, I64_MAX, ids[2]))
    con.commit()
    con.close()
    return path


def _extreme_json(src: Path, tmp: Path) -> Path:
    doc = json.loads(src.read_text())
    recs = doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
    recs[0]["start_timestamp"] = I64_MIN
    recs[1]["end_timestamp"] = I64_MAX
    recs[2]["start_timestamp"], recs[2]["end_timestamp"] = I64_MAX - 1, I64_MAX
    path = tmp / src.name
    path.write_text(json.dumps(doc))
    return path


def _extreme_csv(src: Path, tmp: Path) -> Path:
    header, *rows = src.read_text().rstrip("\n").split("\n")
    names = [n.strip('"') for n in header.split(",")]
    s, e = names.index("Start_Timestamp"), names.index("End_Timestamp")
    cells = [r.split(",") for r in rows]  # the writer's names have no commas here
    assert all(len(c) == len(names) for c in cells[:3])
    cells[0][s] = str(I64_MIN)
    cells[1][e] = str(I64_MAX)
    cells[2][s], cells[2][e] = str(I64_MAX - 1), str(I64_MAX)
    out = tmp / "csv"
    out.mkdir()
    for f in src.parent.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    (out / src.name).write_text("\n".join([header, *map(",".join, cells)]) + "\n")
    return out / src.name


@pytest.mark.parametrize("kind,make,why", [
    ("db", _extreme_db, "3 outside the process's profiling window"),
    ("json", _extreme_json, "3 outside the process's profiling window"),
    ("csv", _extreme_csv, "3 with a negative timestamp or one past 2^62 ns"),
])
def test_int64_extreme_timestamps_are_dropped_and_counted(
        small: dict[str, Path], tmp_path: Path, kind: str, make, why: str) -> None:
    base = _base(small, kind)
    trace = tracelens.load(make(small[kind], tmp_path))
    assert trace.events.height == base.events.height - 3
    assert 0 < _span(trace) <= _span(base)
    assert any("dropped 3 kernel dispatches the model cannot hold: " + why in w
               for w in trace.meta.warnings), trace.meta.warnings
