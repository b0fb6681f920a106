"""Names too long to be any real kernel's are cut, once, right after reading.

The longest kernel names in the real traces here are about 5 KB (C++ templates). A hostile or
broken file can give thousands of events one 1 MB name: it costs nothing in the reader (polars
keeps one copy behind string views), but every analysis that groups or de-duplicates rows by
the name together with another key encodes each row's copy (3,153 dispatches of a 1 MB name
took 3.2 GB). A name past :data:`MAX_NAME_BYTES` keeps its first bytes and gets its length and
a hash, so two long names stay distinct and the cut is visible; the warning counts them.
"""

from __future__ import annotations

import hashlib

import polars as pl

from tracelens.core.model import Notice, Text, Trace

MAX_NAME_BYTES = 16 << 10  # 3x the longest real kernel name seen (5,160 bytes, xDiT)


def _short(name: str) -> str:
    raw = name.encode()
    head = raw[:MAX_NAME_BYTES].decode(errors="ignore")
    return f"{head}…[{len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()[:12]}]"


def cap_long_names(trace: Trace, file_name: str) -> None:
    """Cut the event and host-event names longer than :data:`MAX_NAME_BYTES` (one Python
    call per distinct long name: normally none), with one warning."""
    rows = longest = 0
    distinct: set[str] = set()
    for attr in ("events", "host_events"):
        df = getattr(trace, attr)
        if "name" not in df.columns or not df.height:
            continue
        name = pl.col("name")
        coded = df.schema["name"] == Text
        long = (name.cat.len_bytes() if coded else name.str.len_bytes()) > MAX_NAME_BYTES
        n = df.select(long.sum()).item()
        if not n:
            continue
        found = df.filter(long)["name"].unique()
        names = found.to_list()
        mapping = {nm: _short(nm) for nm in names}
        rows += n
        distinct.update(names)
        longest = max(longest, max(len(nm.encode()) for nm in names))
        if coded:  # joined on the codes: decoding every row's copy would cost what it saves
            cut = pl.DataFrame({"name": found, "_cut": pl.Series(
                [mapping[nm] for nm in names], dtype=Text)})
            setattr(trace, attr, df.join(cut, on="name", how="left", maintain_order="left")
                    .with_columns(name=pl.coalesce("_cut", "name")).drop("_cut"))
        else:
            setattr(trace, attr, df.with_columns(
                name=pl.when(long).then(name.replace(mapping)).otherwise(name)))
    if rows:
        trace.meta.warn(Notice.of(
            "load.long_names", "{file}: {names} names longer than {cap} bytes (longest "
            "{longest}) on {rows} events are cut to {cap} bytes and marked with their length "
            "and hash: no real kernel name is that long, and each copy of it cost memory in "
            "every analysis", file=file_name, names=len(distinct), cap=MAX_NAME_BYTES,
            longest=longest, rows=rows))
