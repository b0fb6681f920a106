"""tracelens.frames: the shared frame helpers against the polars operations they replace."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.frames import distinct
from tracelens.model import Text

row = st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([0, 1, None]),
                st.integers(0, 2))


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=40), st.booleans())
def test_distinct_is_unique_in_first_seen_order(rows: list[tuple], grouped: bool) -> None:
    """Rows grouped by key (as events arrive) or in any order, nulls included: the rows of
    ``unique(maintain_order=True)``, in the same order."""
    df = pl.DataFrame(sorted(rows, key=repr) if grouped else rows, orient="row",
                      schema={"host": Text, "rank": pl.Int32, "device": pl.Int32})
    for cols in (["host", "rank"], ["host", "rank", "device"], ["device"]):
        assert distinct(df, cols).equals(df.select(cols).unique(maintain_order=True))
