"""Damaged and hostile RPD files are never read silently (issue 25 items 12b/12c, for RPD).

Each file is our writer's RPD of the MI300X sample (``tests/test_rpd.py``) with one piece of
damage: a damaged b-tree, INT64 extreme or text timestamps, a view where a table should be,
a gpuId that is no ordinal, one huge shared name, seeded wrong-typed values. Each is refused
with one line or read with every dropped record counted by reason; never a hang.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

import tracelens
from tests.test_rocprof_damage import I64_MAX, I64_MIN, _swap_children
from tests.test_rocprof_mutation import _loads_or_refuses
from tests.test_rpd import OTHER, STEP_NAME, TASKS, _copy, _edit, _source, sample_files
from tracelens.core.errors import TraceInputError
from tracelens.loading.formats import sniff_format
from tracelens_dev.writers.rocprof import write_rpd


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return sample_files(tmp_path_factory.mktemp("rpd_damage"))


def test_damaged_table_is_refused(files, tmp_path: Path) -> None:
    path = _copy(files["rpd"], tmp_path)
    _swap_children(path, "rocpd_op", exact=True)
    with pytest.raises(TraceInputError, match=r"damaged SQLite database \(PRAGMA "
                       r"quick_check: .*out of order"):
        tracelens.load(path)


def test_int64_extreme_times_are_dropped_and_counted(files, tmp_path: Path) -> None:
    path = _copy(files["rpd"], tmp_path)
    con = sqlite3.connect(path)
    ids = [r[0] for r in con.execute(
        "SELECT O.id FROM rocpd_op O JOIN rocpd_string T ON T.id = O.opType_id "
        "WHERE T.string = 'KernelExecution' ORDER BY O.id LIMIT 3")]
    con.execute("UPDATE rocpd_op SET start = ? WHERE id = ?", (I64_MIN, ids[0]))
    con.execute('UPDATE rocpd_op SET "end" = ? WHERE id = ?', (I64_MAX, ids[1]))
    con.execute('UPDATE rocpd_op SET start = ?, "end" = ? WHERE id = ?',
                (I64_MAX - 1, I64_MAX, ids[2]))
    con.commit()
    con.close()
    base = tracelens.load(files["rpd"])
    trace = tracelens.load(path)
    assert trace.events.height == base.events.height - 3
    assert trace.events["end_ns"].max() == base.events["end_ns"].max()
    assert any("dropped 3 kernel dispatches the model cannot hold: 3 with a negative "
               "timestamp or one past 2^62 ns" in w for w in trace.meta.warnings)


def test_text_in_a_time_column_is_counted(files, tmp_path: Path) -> None:
    path = _copy(files["rpd"], tmp_path)
    con = sqlite3.connect(path)
    con.execute("UPDATE rocpd_op SET start = 'soon' WHERE id = 1")
    con.commit()
    con.close()
    trace = tracelens.load(path)
    assert any("1 values of start are not of its type" in w for w in trace.meta.warnings)
    assert any("1 without a valid rocpd_op.start" in w for w in trace.meta.warnings)


def test_a_view_named_like_a_table_is_not_read(files, tmp_path: Path) -> None:
    """Only objects of type ``table``: a database whose ``rocpd_op`` is a view is not RPD,
    and the error says that it is a view (not that the table is missing)."""
    path = tmp_path / "view.rpd"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, string TEXT)")
    con.execute("CREATE VIEW rocpd_op AS WITH RECURSIVE r(id) AS (SELECT 1 UNION ALL SELECT "
                "id + 1 FROM r) SELECT id, id AS gpuId FROM r")
    con.commit()
    con.close()
    assert sniff_format(path) == "sqlite"
    from parsers.rocprof import read_rpd
    with pytest.raises(TraceInputError, match="rocpd_op is a view, not a table"):
        read_rpd(path)


def test_time_bound_on_every_statement(files, monkeypatch) -> None:
    monkeypatch.setenv("TRACELENS_SQLITE_SECONDS", "0")
    with pytest.raises(TraceInputError, match="took more than 0 s .set "
                       "TRACELENS_SQLITE_SECONDS"):
        tracelens.load(files["rpd"])


# ---- seeded mutations: every one loads (dropped rows counted) or is refused in one line --

_MUTATED = {"rocpd_op": ("gpuId", "queueId", "start", "end", "description_id", "opType_id"),
            "rocpd_api": ("pid", "tid", "start", "end", "apiName_id", "args_id"),
            "rocpd_api_ops": ("api_id", "op_id"), "rocpd_string": ("string",),
            "rocpd_kernelapi": ("gridX", "workgroupY", "groupSegmentSize", "codeObject_id"),
            "rocpd_copyapi": ("size",), "rocpd_metadata": ("value",)}
_VALUES = ["x", "", 1.5, -1, 1 << 62, b"\x00\xff"]


@pytest.fixture(scope="module")
def small_rpd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = _source()
    trace.events = trace.events.sort("start_ns", "device", "stream").head(300)
    path = tmp_path_factory.mktemp("small") / "small.rpd"
    write_rpd(trace, path, step_name=STEP_NAME, task_kernels=TASKS, extra_ops=OTHER)
    return path


@pytest.mark.parametrize("seed", range(16))
def test_mutated_rpd_loads_or_is_refused(small_rpd: Path, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = _copy(small_rpd, tmp_path)
    con = sqlite3.connect(path)
    for _ in range(rng.randint(1, 5)):
        table = rng.choice(sorted(_MUTATED))
        col = rng.choice(_MUTATED[table])
        key = "api_ptr_id" if table in ("rocpd_kernelapi", "rocpd_copyapi") else "id"
        ids = [r[0] for r in con.execute(f'SELECT "{key}" FROM "{table}"')]
        for i in rng.sample(ids, min(len(ids), rng.randint(1, 20))):
            con.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE "{key}" = ?',
                        (rng.choice(_VALUES), i))
    con.commit()
    con.close()
    _loads_or_refuses(path)


def test_a_gpu_id_that_is_no_ordinal_is_dropped_and_counted(files, tmp_path: Path) -> None:
    """Found by the mutations: a gpuId of 2^62 failed the device column (int32) with a
    polars error; such work is dropped and counted."""
    path = _edit(files["rpd"], tmp_path, "UPDATE rocpd_op SET gpuId = 4611686018427387904 "
                 "WHERE id IN (SELECT id FROM rocpd_op ORDER BY id LIMIT 2)")
    trace = tracelens.load(path)
    assert trace.events.height == tracelens.load(files["rpd"]).events.height - 2
    assert any("dropped 2 kernel dispatches on agents that are not GPUs of the agent table"
               in w for w in trace.meta.warnings), trace.meta.warnings


def test_one_long_name_shared_by_every_op_is_stored_once(files, tmp_path: Path) -> None:
    """Names are joined in polars (one copy), not in SQL (one Python string per row): with
    a 1 MiB name on each of the 2,664 ops, loading peaked at 5.4 GB before, 111 MB after."""
    import os
    import subprocess
    import sys
    path = _edit(files["rpd"], tmp_path,
                 "INSERT INTO rocpd_string (id, string) VALUES (999999, "
                 "printf('%.*c', 1048576, 'k'))",
                 "UPDATE rocpd_op SET description_id = 999999")
    code = ("import resource, sys, tracelens; t = tracelens.load(sys.argv[1]); "
            "print(t.events.height, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, timeout=300, env={**os.environ})
    assert res.returncode == 0, res.stderr[-2000:]
    events, peak_kib = map(int, res.stdout.split())
    assert events == files["source"].events.height
    assert peak_kib < 1 << 20  # 1 GiB; the names alone would be 2.7 GiB
