"""The run store: one SQLite file of recorded runs, safe for concurrent writers.

Why SQLite: one file, no server, and its locking makes two CI jobs adding runs at once
safe. The store runs in WAL mode (readers never block the writer), every write is one
``BEGIN IMMEDIATE`` transaction (a second writer waits on the busy timeout, then goes on:
nothing is lost), and ``schema_version`` holds the version, migrated forward by
:data:`MIGRATIONS` on open. A run is a few rows per table (no events).

A file that is not a SQLite database, a damaged one, another program's database or one
written by a newer tracelens is refused with :class:`TraceInputError` (exit 2, one line)
and left exactly as it is: nothing is written to it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Callable

from tracelens.core.errors import TraceInputError
from tracelens.results.history import (CategoryRecord, CommRecord, FindingRecord,
                                       KernelRecord, RecordedInput, RunRecord)

SCHEMA_VERSION = 2
APPLICATION_ID = 0x544C4853  # "TLHS": a tracelens history store
BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another's transaction
_RETRY_S = 0.05  # between checks of a store another process holds while it is opened
SQLITE_MAGIC = b"SQLite format 3\x00"

_V1 = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    label TEXT NOT NULL UNIQUE,
    recorded_at TEXT NOT NULL,
    inputs_hash TEXT NOT NULL UNIQUE,
    hardware TEXT NOT NULL,
    devices INTEGER NOT NULL,
    hosts INTEGER NOT NULL,
    steps INTEGER NOT NULL,
    steps_source TEXT NOT NULL,
    step_ns REAL NOT NULL,
    mfu REAL,
    tool_version TEXT NOT NULL
);
CREATE TABLE tags (run_id INTEGER NOT NULL REFERENCES runs(id), key TEXT NOT NULL,
                   value TEXT NOT NULL, PRIMARY KEY (run_id, key));
CREATE TABLE inputs (run_id INTEGER NOT NULL REFERENCES runs(id), position INTEGER NOT NULL,
                     path TEXT NOT NULL, sha256 TEXT NOT NULL, bytes INTEGER NOT NULL,
                     PRIMARY KEY (run_id, position));
CREATE TABLE components (run_id INTEGER NOT NULL REFERENCES runs(id),
                         position INTEGER NOT NULL, component TEXT NOT NULL, ns REAL NOT NULL,
                         PRIMARY KEY (run_id, position));
CREATE TABLE categories (run_id INTEGER NOT NULL REFERENCES runs(id), category TEXT NOT NULL,
                         count INTEGER NOT NULL, sum_ns INTEGER NOT NULL,
                         exclusive_ns INTEGER NOT NULL, PRIMARY KEY (run_id, category));
CREATE TABLE kernels (run_id INTEGER NOT NULL REFERENCES runs(id), position INTEGER NOT NULL,
                      category TEXT, program TEXT, op TEXT, key TEXT NOT NULL,
                      name_suffix TEXT, name TEXT, ns_per_step REAL NOT NULL,
                      count_per_step REAL NOT NULL, PRIMARY KEY (run_id, position));
CREATE TABLE comm (run_id INTEGER NOT NULL REFERENCES runs(id), type TEXT NOT NULL,
                   count INTEGER NOT NULL, sum_ns INTEGER NOT NULL,
                   exposed_ns INTEGER NOT NULL, PRIMARY KEY (run_id, type));
"""


def _to_v1(conn: sqlite3.Connection) -> None:
    for stmt in _V1.split(";"):
        if stmt.strip():
            conn.execute(stmt)


_V2 = """
CREATE TABLE findings (run_id INTEGER NOT NULL REFERENCES runs(id), position INTEGER NOT NULL,
                       kind TEXT NOT NULL, target TEXT NOT NULL, title TEXT NOT NULL,
                       saved_ns INTEGER, PRIMARY KEY (run_id, position));
ALTER TABLE runs ADD COLUMN findings_recorded INTEGER NOT NULL DEFAULT 0
"""


def _to_v2(conn: sqlite3.Connection) -> None:
    """Version 2 keeps each run's findings; runs recorded before have none recorded
    (``findings_recorded`` 0), which is not the same as none found."""
    for stmt in _V2.split(";"):
        if stmt.strip():
            conn.execute(stmt)


# version n -> the function that brings a store at version n-1 to n (inside one transaction)
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _to_v1, 2: _to_v2}


class Store:
    """An open run store (:func:`open_store`); ``close()`` when done (or ``with``)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, copy: str | None = None) -> None:
        self.path = path
        self.conn = conn
        self.copy = copy  # the private folder a read-only open copied the store into

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()
        if self.copy is not None:
            import shutil
            shutil.rmtree(self.copy, ignore_errors=True)

    def _fail(self, exc: sqlite3.Error) -> TraceInputError:
        return _store_error(self.path, exc)

    def find(self, inputs_hash: str) -> str | None:
        """The label of the run recorded from these inputs, if any."""
        try:
            row = self.conn.execute("SELECT label FROM runs WHERE inputs_hash = ?",
                                    (inputs_hash,)).fetchone()
        except sqlite3.Error as exc:
            raise self._fail(exc) from None
        return row[0] if row else None

    def add(self, r: RunRecord) -> tuple[str, bool]:
        """Record ``r`` in one transaction: (its label, True), or (the label already
        recorded from the same inputs, False) with nothing written. A label in use by other
        inputs is an error."""
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT label FROM runs WHERE inputs_hash = ?",
                                   (r.inputs_hash,)).fetchone()
                if row:
                    conn.execute("ROLLBACK")
                    return row[0], False
                if conn.execute("SELECT 1 FROM runs WHERE label = ?", (r.label,)).fetchone():
                    conn.execute("ROLLBACK")
                    raise TraceInputError(self.path, f"label {r.label!r} is already used by "
                                          "another run (give --label another name)")
                _insert(conn, r)
                conn.execute("COMMIT")
            except sqlite3.Error:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from None
        return r.label, True

    def runs(self) -> list[RunRecord]:
        """Every run, in the order recorded (time recorded, then insertion)."""
        try:
            return _read_runs(self.conn, _version(self.conn, self.path))
        except sqlite3.Error as exc:
            raise self._fail(exc) from None


def _insert(conn: sqlite3.Connection, r: RunRecord) -> None:
    cur = conn.execute(
        "INSERT INTO runs (label, recorded_at, inputs_hash, hardware, devices, hosts, steps, "
        "steps_source, step_ns, mfu, tool_version, findings_recorded) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (r.label, r.recorded_at, r.inputs_hash, r.hardware, r.devices, r.hosts, r.steps,
         r.steps_source, r.step_ns, r.mfu, r.tool_version, int(r.findings is not None)))
    rid = cur.lastrowid
    conn.executemany("INSERT INTO tags VALUES (?, ?, ?)",
                     [(rid, k, v) for k, v in sorted(r.tags.items())])
    conn.executemany("INSERT INTO inputs VALUES (?, ?, ?, ?, ?)",
                     [(rid, i, x.path, x.sha256, x.bytes) for i, x in enumerate(r.inputs)])
    conn.executemany("INSERT INTO components VALUES (?, ?, ?, ?)",
                     [(rid, i, c, ns) for i, (c, ns) in enumerate(r.components.items())])
    conn.executemany("INSERT INTO categories VALUES (?, ?, ?, ?, ?)",
                     [(rid, c.category, c.count, c.sum_ns, c.exclusive_ns)
                      for c in r.categories])
    conn.executemany("INSERT INTO kernels VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     [(rid, i, k.category, k.program, k.op, k.key, *_name_parts(k),
                       k.ns_per_step, k.count_per_step) for i, k in enumerate(r.kernels)])
    conn.executemany("INSERT INTO comm VALUES (?, ?, ?, ?, ?)",
                     [(rid, c.type, c.count, c.sum_ns, c.exposed_ns) for c in r.comm])
    conn.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?)",
                     [(rid, i, f.kind, f.target, f.title, f.saved_ns)
                      for i, f in enumerate(r.findings or ())])


def _name_parts(k: KernelRecord) -> tuple[str | None, str | None]:
    """(suffix, name): a kernel's name is its normalized key and a suffix (``.kd``, a clone
    suffix) almost always, and Tensile names run to 600 characters: stored once."""
    if k.name.startswith(k.key):
        return k.name[len(k.key):], None
    return None, k.name


def _grouped(conn: sqlite3.Connection, sql: str) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for row in conn.execute(sql):
        out.setdefault(row[0], []).append(row[1:])
    return out


def series_key(tags: dict[str, str], hardware: str, devices: int) -> str:
    """The series a run belongs to: its tags, hardware and device count (runs of different
    hardware or device counts are never compared)."""
    t = ",".join(f"{k}={v}" for k, v in sorted(tags.items())) or "(no tags)"
    return f"{t} | {setup_text(hardware, devices)}"


def setup_text(hardware: str, devices: int) -> str:
    """``8× AMD Instinct MI300X | 8 devices``: a series' hardware and device count."""
    return f"{hardware} | {devices} device{'' if devices == 1 else 's'}"


def _read_runs(conn: sqlite3.Connection, version: int = SCHEMA_VERSION) -> list[RunRecord]:
    """The runs of a store at ``version`` (one of schema 1, read where it could not be
    migrated, has no findings: each run's are unknown)."""
    tags = _grouped(conn, "SELECT run_id, key, value FROM tags ORDER BY run_id, key")
    inputs = _grouped(conn, "SELECT run_id, path, sha256, bytes FROM inputs "
                      "ORDER BY run_id, position")
    comps = _grouped(conn, "SELECT run_id, component, ns FROM components "
                     "ORDER BY run_id, position")
    cats = _grouped(conn, "SELECT run_id, category, count, sum_ns, exclusive_ns FROM "
                    "categories ORDER BY run_id, exclusive_ns DESC, category")
    kerns = _grouped(conn, "SELECT run_id, category, program, op, key, name_suffix, name, "
                     "ns_per_step, "
                     "count_per_step FROM kernels ORDER BY run_id, position")
    comm = _grouped(conn, "SELECT run_id, type, count, sum_ns, exposed_ns FROM comm "
                    "ORDER BY run_id, type")
    found = _grouped(conn, "SELECT run_id, kind, target, title, saved_ns FROM findings "
                     "ORDER BY run_id, position") if version >= 2 else {}
    kept_col = "findings_recorded" if version >= 2 else "0"
    out = []
    for (rid, label, at, h, hw, devices, hosts, steps, src, step_ns, mfu, ver,
         kept) in conn.execute(
            "SELECT id, label, recorded_at, inputs_hash, hardware, devices, hosts, steps, "
            f"steps_source, step_ns, mfu, tool_version, {kept_col} FROM runs "
            "ORDER BY recorded_at, id"):
        t = {k: v for k, v in tags.get(rid, [])}
        out.append(RunRecord(
            label=label, recorded_at=at, tags=t, series=series_key(t, hw, devices),
            hardware=hw, devices=devices, hosts=hosts, steps=steps, steps_source=src,
            step_ns=step_ns, components={c: ns for c, ns in comps.get(rid, [])}, mfu=mfu,
            tool_version=ver, inputs_hash=h,
            inputs=tuple(RecordedInput(*x) for x in inputs.get(rid, [])),
            categories=tuple(CategoryRecord(*x) for x in cats.get(rid, [])),
            kernels=tuple(KernelRecord(c, p, o, k, k + x if x is not None else n, ns, cnt)
                          for c, p, o, k, x, n, ns, cnt in kerns.get(rid, [])),
            comm=tuple(CommRecord(*x) for x in comm.get(rid, [])),
            findings=tuple(FindingRecord(*x) for x in found.get(rid, [])) if kept else None))
    return out


def _check_file(path: Path, create: bool) -> None:
    """Refuse, before SQLite touches it, what is not a store file (module doc)."""
    if path.is_dir():
        raise TraceInputError(path, "is a directory, not a run store file")
    if not path.exists():
        if not create:
            raise TraceInputError(path, "no such run store (`tracelens history add` creates "
                                  "it)")
        if not path.parent.is_dir():
            raise TraceInputError(path, f"cannot create: folder {path.parent} does not exist")
        return
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    if head and head != SQLITE_MAGIC:
        raise TraceInputError(path, "not a SQLite database, so not a run store (the file is "
                              "left as it is)")
    if 0 < len(head) < len(SQLITE_MAGIC):
        raise TraceInputError(path, "truncated SQLite database (the file is left as it is)")


def _store_error(path: Path, exc: sqlite3.Error) -> TraceInputError:
    """The one line a SQLite error of the store becomes."""
    if "locked" in str(exc):
        return TraceInputError(path, f"another process held the run store for "
                               f"{BUSY_TIMEOUT_S:g} s; nothing was written, try again")
    return TraceInputError(path, f"run store unreadable ({exc}); the file is left as it is")


def open_store(path: str | Path, create: bool = False) -> Store:
    """The store at ``path``, migrated to :data:`SCHEMA_VERSION` (created when ``create``
    and absent). Every refusal names the file and leaves it untouched (module doc)."""
    path = Path(path)
    _check_file(path, create)
    copy = None
    # a read in a folder this process may not write (a CI artifact, a read-only mount)
    # writes nothing there: a read-write open would need -wal and -shm files beside it
    only_read = not create and not (os.access(path, os.W_OK) and os.access(path.parent,
                                                                            os.W_OK))
    try:
        if only_read:
            conn, copy = _read_only(path)
        else:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise TraceInputError(path, f"cannot open the run store: {exc}") from None
    except OSError as exc:
        raise TraceInputError(path, f"cannot read the run store: {exc.strerror or exc}") \
            from None
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            _prepare(conn, path, create)
            return Store(path, conn, copy)
        except TraceInputError:
            Store(path, conn, copy).close()
            raise
        except sqlite3.Error as exc:
            # SQLite answers some lock conflicts at once instead of through the busy timeout
            # (a journal-mode change or a read meeting another process creating the file or
            # recovering its WAL): wait and check again, as the busy timeout would have
            if "locked" in str(exc) and time.monotonic() < deadline:
                time.sleep(_RETRY_S)
                continue
            Store(path, conn, copy).close()
            raise _store_error(path, exc) from None


def _read_only(path: Path) -> tuple[sqlite3.Connection, str | None]:
    """A connection that reads the store as SQLite would and writes nothing anywhere near
    it: with a non-empty ``-wal`` beside it (rows not yet checkpointed), the store and its
    log copied into a private temp folder and opened there (the folder returned, to remove);
    else opened read-only, and immutable when in WAL mode (a plain read-only open of a WAL
    file creates ``-shm`` beside it, and fails in a read-only folder)."""
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size:
        import shutil
        import tempfile
        folder = tempfile.mkdtemp(prefix="tracelens-store-")
        try:
            shutil.copyfile(path, Path(folder) / path.name)
            shutil.copyfile(wal, Path(folder) / wal.name)
            return sqlite3.connect(str(Path(folder) / path.name), timeout=BUSY_TIMEOUT_S,
                                   isolation_level=None), folder
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
    with path.open("rb") as f:
        head = f.read(20)
    in_wal = len(head) == 20 and head[18] == 2
    uri = path.resolve().as_uri() + ("?mode=ro&immutable=1" if in_wal else "?mode=ro")
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None), None


def _prepare(conn: sqlite3.Connection, path: Path, create: bool) -> None:
    """Check the file is a sound store of a version this tracelens reads, then migrate it
    forward in one transaction (only a store of ours is ever written)."""
    check = conn.execute("PRAGMA quick_check").fetchone()
    if not check or check[0] != "ok":
        what = " ".join(str(check[0] if check else "?").replace("\\n", " ").split())
        raise TraceInputError(path, f"damaged SQLite database ({what[:200]}); the file is left "
                              "as it is")
    version = _version(conn, path)
    if version > SCHEMA_VERSION:
        raise TraceInputError(path, f"run store of schema {version}, written by a newer "
                              f"tracelens (this one reads up to {SCHEMA_VERSION})")
    if version == SCHEMA_VERSION:
        return
    if not create and version == 0:
        raise TraceInputError(path, "empty file, not a run store yet (`tracelens history "
                              "add` creates it)")
    if not create and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return  # a store we may only read (a CI artifact) is read at its own version
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _version(conn, path)  # another writer may have migrated it meanwhile
        if version == 0:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO schema_version VALUES (0)")
        for v in range(version + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[v](conn)
            conn.execute("UPDATE schema_version SET version = ?", (v,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _version(conn: sqlite3.Connection, path: Path) -> int:
    """The store's schema version; 0 for an empty database; refused when it is some other
    program's database."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return 0
    app = conn.execute("PRAGMA application_id").fetchone()[0]
    if "schema_version" not in tables or app != APPLICATION_ID:
        raise TraceInputError(path, "a SQLite database, but not a tracelens run store (the "
                              "file is left as it is)")
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    if row is None or not isinstance(row[0], int):
        raise TraceInputError(path, "run store without a schema version (damaged; the file "
                              "is left as it is)")
    return row[0]
