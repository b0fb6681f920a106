"""Opening a SQLite trace database safely, for the rocpd and RPD readers alike.

A ``.db.gz`` is inflated into the temp directory (removed on every exit path). The file is
read as SQLite itself reads it, and nothing is ever written beside it (the input folder may
be read-only): a database with a ``-wal`` or ``-journal`` file beside it (rows committed only
in the write-ahead log, a hot rollback journal of a write cut short) is copied with that file
into a private temp directory and opened there, where SQLite applies the log or rolls the
journal back; without one, a rollback-mode file is opened read-only (``mode=ro``: shared
locks, no file created), a WAL-mode file read-only and immutable (its log is empty: a
read-only open would create ``-shm`` beside it). A truncated
file is refused from its header, a damaged b-tree by ``PRAGMA quick_check``; a progress
handler bounds every statement (``TRACELENS_SQLITE_SECONDS``); values that do not fit their
column's type are made unknown and counted.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import polars as pl

from parsers.budget import env_limit
from parsers.rawfile import inflate_to, is_gzip
from tracelens.core.errors import TraceInputError

SECONDS_ENV = "TRACELENS_SQLITE_SECONDS"
SECONDS = 600.0
T = TypeVar("T")


class local_copy:
    """The database file itself, or (for ``.db.gz``) an inflated copy in the temp directory,
    bounded by the inflation budget (``parsers.budget``) and removed on every way out: the
    read's end, a refusal past the budget, damaged gzip data, a full disk, Ctrl-C."""

    def __init__(self, path: Path) -> None:
        self.path, self.tmp = path, None
        self.folder: str | None = None  # the private copy of a database with its journal

    def __enter__(self) -> Path:
        env_limit()  # a bad TRACELENS_MAX_INFLATE is an error here too, not ignored
        if not is_gzip(self.path):
            side = journals(self.path)
            return self._with_journals(side) if side else self.path
        try:
            self.tmp = tempfile.NamedTemporaryFile(prefix="tracelens-", suffix=".db",
                                                   delete=False)
            with self.tmp:
                inflate_to(self.path, self.tmp)
        except OSError as exc:  # inflate_to reports the input's own failures itself
            self.__exit__()
            raise TraceInputError(self.path, "cannot write its inflated copy in the temp "
                                  f"directory ({exc.strerror or exc}; set TMPDIR to a "
                                  "directory with room)") from None
        except BaseException:  # a refusal, Ctrl-C: the copy goes too
            self.__exit__()
            raise
        return Path(self.tmp.name)

    def _with_journals(self, side: list[Path]) -> Path:
        """The database and its journal files copied into a private temp directory (SQLite
        applies a WAL or rolls a hot journal back there, never beside the input)."""
        import shutil
        try:
            self.folder = tempfile.mkdtemp(prefix="tracelens-db-")
            copy = Path(self.folder) / self.path.name
            for f in (self.path, *side):
                shutil.copyfile(f, Path(self.folder) / f.name)
        except OSError as exc:
            self.__exit__()
            raise TraceInputError(self.path, "cannot copy it with its journal "
                                  f"({', '.join(f.name for f in side)}) into the temp "
                                  f"directory ({exc.strerror or exc}; set TMPDIR to a "
                                  "directory with room)") from None
        except BaseException:
            self.__exit__()
            raise
        return copy

    def __exit__(self, *exc: Any) -> None:
        if self.tmp is not None:
            Path(self.tmp.name).unlink(missing_ok=True)
        if self.folder is not None:
            import shutil
            shutil.rmtree(self.folder, ignore_errors=True)


def journals(path: Path) -> list[Path]:
    """The non-empty ``-wal`` and ``-journal`` files beside ``path``: what SQLite reads with
    it (an empty one holds nothing to apply)."""
    found = []
    for suffix in ("-wal", "-journal"):
        side = path.with_name(path.name + suffix)
        try:
            if side.is_file() and side.stat().st_size > 0:
                found.append(side)
        except OSError:
            continue
    return found


def open_uri(db: Path, private: bool = False) -> str:
    """How to open ``db`` read-only: ``mode=ro`` for a rollback-mode file (it takes shared
    locks and creates nothing), read-only and immutable for a WAL-mode file (header bytes
    18-19 are 2; its log is empty or it would have been copied with it, and a read-only open
    would create ``-shm`` beside it). A ``private`` copy (:class:`local_copy`'s, with its
    journal) is opened read-write, so SQLite can apply or roll back its journal."""
    uri = db.resolve().as_uri()
    if private:
        return uri + "?mode=rw"
    try:
        with open(db, "rb") as fh:
            head = fh.read(20)
    except OSError:
        head = b""
    wal = len(head) == 20 and head[18] == 2 and head[19] == 2
    return uri + ("?mode=ro&immutable=1" if wal else "?mode=ro")


def check_size(path: Path, db: Path) -> None:
    """A truncated file: the header's page count times page size exceeds the file size."""
    with open(db, "rb") as fh:
        head = fh.read(100)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        raise TraceInputError(path, "not a SQLite database (bad header)")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]  # in-header size is valid for this change counter
    size = db.stat().st_size
    if valid and pages and page * pages > size:
        raise TraceInputError(path, f"truncated SQLite database (its header says "
                              f"{page * pages} bytes, the file has {size})")


def connect(path: Path, db: Path, private: bool = False) -> sqlite3.Connection:
    con = sqlite3.connect(open_uri(db, private), uri=True)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        con.close()
        detail = exc if isinstance(exc, sqlite3.DatabaseError) else "text that is not UTF-8"
        raise TraceInputError(path, f"corrupt or truncated SQLite database ({detail})") from None
    return con


class Deadline:
    """A progress handler that interrupts any statement once the read has run for
    ``TRACELENS_SQLITE_SECONDS`` (default 600): no query on a hostile database (a recursive
    CTE, a cross join) can run forever."""

    def __init__(self, con: sqlite3.Connection) -> None:
        import os
        import time
        try:
            self.seconds = float(os.environ.get(SECONDS_ENV, SECONDS))
        except ValueError:
            self.seconds = SECONDS
        self._now = time.monotonic
        self._end = self._now() + self.seconds
        self.expired = False
        con.set_progress_handler(self._tick, 10_000)

    def _tick(self) -> int:
        self.expired = self._now() > self._end
        return int(self.expired)


def check_integrity(path: Path, con: sqlite3.Connection) -> None:
    """SQLite's own structural check: a damaged b-tree (rows out of order, a bad page) reads
    as a fraction of its rows without any error, so a file that fails it is refused."""
    problems = [r[0] for r in con.execute("PRAGMA quick_check(3)")]
    if problems != ["ok"]:
        lines = [x for p in problems for x in str(p).splitlines() if not x.startswith("***")]
        raise TraceInputError(path, "damaged SQLite database (PRAGMA quick_check: "
                              f"{'; '.join(lines)[:200]}); rows may be missing, so it is "
                              "not read")


def sanitize(rows: list[tuple], schema: dict[str, pl.DataType], bad: dict[str, int]
              ) -> list[tuple]:
    """Rows with each value that does not fit its column's type set to None (counted)."""
    cols = list(zip(*rows)) if rows else [()] * len(schema)
    out = []
    for (name, dtype), values in zip(schema.items(), cols):
        if dtype == pl.Int64:
            fixed = [v if type(v) is int and -(1 << 63) <= v < (1 << 63) else None
                     for v in values]
        elif dtype == pl.String:
            fixed = [v if isinstance(v, str) else None for v in values]
        elif dtype == pl.Float64:
            fixed = [float(v) if type(v) in (int, float) else None for v in values]
        else:
            fixed = list(values)
        n = sum(1 for v, f in zip(values, fixed) if v is not None and f is None)
        if n:
            bad[name] = bad.get(name, 0) + n
        out.append(fixed)
    return list(zip(*out))


def read_db(path: Path, read: Callable[[sqlite3.Connection], T], what: str) -> T:
    """``read(con)`` on the database at ``path``, opened safely; every SQLite, text or
    type failure (and the time bound) becomes one input error naming the file."""
    copy = local_copy(path)
    with copy as db:
        check_size(path, db)
        con = connect(path, db, copy.folder is not None)
        clock = Deadline(con)
        try:
            check_integrity(path, con)
            return read(con)
        except sqlite3.DatabaseError as exc:
            if clock.expired:
                raise TraceInputError(path, f"reading the SQLite database took more than "
                                      f"{clock.seconds:g} s (set {SECONDS_ENV} to allow "
                                      "longer)") from None
            raise TraceInputError(path, f"corrupt or truncated SQLite database ({exc})") from None
        except UnicodeDecodeError:
            raise TraceInputError(path, "corrupt SQLite database (text that is not UTF-8)"
                                  ) from None
        except (pl.exceptions.PolarsError, TypeError, OverflowError) as exc:
            raise TraceInputError(path, f"{what} values of an unexpected type "
                                  f"({str(exc).splitlines()[0][:120]})") from None
        finally:
            con.close()


def table_names(path: Path) -> set[str]:
    """The tables of the (uncompressed) database at ``path`` as SQLite reads it (its journal
    applied, :class:`local_copy`), bounded; an empty set when it cannot be read (its reader
    says why)."""
    copy = local_copy(path)
    try:
        with copy as db:
            con = sqlite3.connect(open_uri(db, copy.folder is not None), uri=True)
            try:
                con.set_progress_handler(lambda: 1, 1_000_000)  # a damaged schema cannot loop
                return {r[0] for r in con.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
            finally:
                con.close()
    except (sqlite3.Error, UnicodeDecodeError, TraceInputError, OSError):
        return set()


def refuse_views(con: sqlite3.Connection, path: Path, names: Iterable[str], what: str) -> None:
    """Raise, naming them, when any of ``names`` (tables ``what`` needs) is a view: a view
    can hold any query, so its rows are not the profiler's records and are not read; saying
    so beats saying the table is missing."""
    wanted = set(names)
    views = sorted(r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'view'") if r[0] in wanted)
    if views:
        raise TraceInputError(path, f"{what}: {', '.join(views)} "
                              f"{'is a view' if len(views) == 1 else 'are views'}, not "
                              "a table (a view can hold any query: only tables are read)")
