"""The XSpace reader's public face, kept for the loader and existing callers: the code is in
the ``parsers.xspace`` package."""

from parsers.xspace.columns import (COLUMN_BUDGET_BASE, COLUMN_BUDGET_FACTOR,
                                    COLUMN_BYTES_PER_EVENT)
from parsers.xspace.reader import read
from parsers.xspace.space import FORMAT, MAX_PROTO_BYTES, load_xspace, read_raw

__all__ = ["COLUMN_BUDGET_BASE", "COLUMN_BUDGET_FACTOR", "COLUMN_BYTES_PER_EVENT", "FORMAT",
           "MAX_PROTO_BYTES", "load_xspace", "read", "read_raw"]
