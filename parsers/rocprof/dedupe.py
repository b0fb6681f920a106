"""Records a rocprofv3 or RPD input holds twice: read once, and counted.

A file re-saved by a script, two outputs concatenated, or a database whose rows were
inserted twice holds the same dispatch twice; read as it is, every kernel count and busy
time doubles with nothing to show it. A record is a copy of another when every field the
reader keeps is equal except the record's own row id (``dispatch_id``: rocpd's and RPD's
primary keys are given to each inserted row, so a copied row gets a new one): one queue
cannot run two dispatches that start and end at the same nanosecond, so such rows are one
dispatch recorded twice, never two. A process that appears twice (same host, pid and start
time, the same records) is read once.
"""

from __future__ import annotations

import polars as pl

from parsers.rocprof.records import Process
from tracelens.model import Notice

ROW_ID = "dispatch_id"  # the record's own id: a copied row gets a new one from the database


def drop_copies(df: pl.DataFrame, what: str, warn: list[Notice], row_id: str = ROW_ID
                ) -> pl.DataFrame:
    """``df`` with each record's later copies (equal in every column but ``row_id``)
    dropped, the first kept, order kept; a notice with the count when there were any."""
    if df.height < 2:
        return df
    keys = [c for c in df.columns if c != row_id]
    first = df.select(pl.struct(keys).is_first_distinct()).to_series()
    n = first.len() - int(first.sum())
    if not n:
        return df
    warn.append(Notice.of("rocprof.duplicate_records", "dropped {n} {what} that repeat an "
                          "earlier record field for field (one record written twice: "
                          "read once)", n=n, what=what))
    return df.filter(first)


def same_process(a: Process, b: Process) -> bool:
    """Whether ``b`` is ``a`` written again: the same host, pid and start, the same records."""
    return (a.host, a.pid, a.init_ns) == (b.host, b.pid, b.init_ns) \
        and a.dispatches.equals(b.dispatches) and a.copies.equals(b.copies) \
        and a.apis.equals(b.apis)


def drop_repeated_processes(procs: list[Process]) -> tuple[list[Process], list[Notice]]:
    """``procs`` with each process that repeats an earlier one dropped, and a notice per
    process dropped."""
    kept: list[Process] = []
    notes: list[Notice] = []
    for p in procs:
        if any(same_process(k, p) for k in kept):
            notes.append(Notice.of("rocprof.repeated_process", "process {pid} on host {host} "
                                   "appears more than once with the same records: read once",
                                   pid=str(p.pid), host=p.host or "unknown"))
            continue
        kept.append(p)
    return kept, notes
