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
from tracelens.core.model import Notice

ROW_ID = "dispatch_id"  # the record's own id: a copied row gets a new one from the database


def drop_copies(df: pl.DataFrame, what: str, warn: list[Notice], row_id: str = ROW_ID
                ) -> pl.DataFrame:
    """``df`` with each record's later copies (equal in every column but ``row_id``)
    dropped, the first kept, order kept; a notice with the count when there were any."""
    if df.height < 2:
        return df
    keys = [c for c in df.columns if c != row_id]
    # first on the numeric fields alone (cheap: no kernel name is hashed); only the rows that
    # repeat another's numbers are compared whole, their text by its categorical code (a
    # 1 MiB name shared by every row is then hashed once per row, never copied per row)
    cheap = [c for c in keys if df.schema[c].is_numeric()]
    if cheap and df.select(pl.struct(cheap).is_unique().all()).item():
        return df
    whole = [pl.col(c).cast(pl.Categorical).to_physical() if df.schema[c] == pl.String
             else pl.col(c) for c in keys]
    first = df.select(pl.struct(whole).is_first_distinct()).to_series()
    n = first.len() - int(first.sum())
    if not n:
        return df
    warn.append(Notice.of("rocprof.duplicate_records", "dropped {n} {what} that repeat an "
                          "earlier record field for field (one record written twice: "
                          "read once)", n=n, what=what))
    return df.filter(first)


def same_process(a: Process, b: Process) -> bool:
    """Whether ``b`` is ``a`` written again: the same host, pid and start, the same records,
    and the same identity where the format records one (``info["identity"]``: a rocpd
    table set's guid, which tells two processes with equal records apart)."""
    return (a.host, a.pid, a.init_ns, a.info.get("identity")) \
        == (b.host, b.pid, b.init_ns, b.info.get("identity")) \
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


def drop_copied_ops(ops: pl.DataFrame, keys: list[str], warn: list[Notice]) -> pl.DataFrame:
    """RPD ops (with their ``api_id`` link) without the rows that copy an earlier op: equal
    in every field of ``keys`` (all but the op's id) and linked to no call or to the
    earlier op's own call. Two ops of equal fields that different calls enqueued (two
    processes' records) are both kept: they are not one row written twice."""
    if ops.height < 2 or ops.select(pl.struct(keys).is_unique().all()).item():
        return ops
    copy = (pl.int_range(pl.len()).over(keys) > 0) & (
        pl.col("api_id").is_null() | (pl.col("api_id") == pl.col("api_id").first().over(keys)))
    is_copy = ops.select(copy.fill_null(False)).to_series()
    n = int(is_copy.sum())
    if n:
        warn.append(Notice.of("rocprof.duplicate_records", "dropped {n} {what} that repeat an "
                              "earlier record field for field (one record written twice: "
                              "read once)", n=n, what="rocpd_op rows"))
    return ops.filter(~is_copy)
