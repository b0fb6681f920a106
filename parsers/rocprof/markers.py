"""ROCTx ranges that mark training steps (``--step-marker REGEX``).

A range (``roctxRangePush``/``Pop`` or ``Start``/``Stop``; zero-length marks are ignored)
whose message matches the regex (Python ``re.search``) is a step. Its number is the named
group ``step`` or the first group when that is an integer; when any matching range has no
number, steps are numbered 0, 1, ... in start order per rank. Ranges with the same number on
one rank (one per thread, say) become one step from the first start to the last end.
"""

from __future__ import annotations

import re

import polars as pl

from tracelens.core.model import STEP_SCHEMA, Notice, conform


def _number(m: re.Match[str]) -> int | None:
    text = m.groupdict().get("step") if "step" in m.re.groupindex else (
        m.group(1) if m.re.groups else None)
    return int(text) if text is not None and text.strip().lstrip("-").isdigit() else None


def steps_from_markers(markers: pl.DataFrame, pattern: str | None
                       ) -> tuple[pl.DataFrame, list[Notice]]:
    """Steps (STEP_SCHEMA, source "marker") from ``markers`` (rank, name, start, end)."""
    if not pattern:
        return pl.DataFrame(schema=STEP_SCHEMA), []
    regex = re.compile(pattern)
    ranges = markers.filter((pl.col("end") > pl.col("start")) & pl.col("name").is_not_null())
    names = ranges["name"].unique().to_list()
    hits = {n: regex.search(n) for n in names}
    table = pl.DataFrame({"name": [n for n in names if hits[n]],
                          "num": [_number(hits[n]) for n in names if hits[n]]},
                         schema={"name": pl.String, "num": pl.Int64})
    sel = ranges.join(table, on="name", how="inner")
    if sel.is_empty():
        return pl.DataFrame(schema=STEP_SCHEMA), [Notice.of(
            "rocprof.marker_unmatched", "no ROCTx range matches --step-marker {pattern!r} "
            "({n} markers): no steps", pattern=pattern, n=markers.height)]
    if sel["num"].null_count() == 0:
        steps = sel.group_by("rank", "num").agg(pl.col("start").min(), pl.col("end").max())
    else:
        steps = sel.sort("rank", "start").with_columns(
            num=pl.int_range(pl.len()).over("rank"))
    steps = conform(steps.sort("rank", "start").select(
        "rank", step="num", start_ns="start", end_ns="end", source=pl.lit("marker")),
        STEP_SCHEMA)
    warnings = []
    prev_end = pl.col("end_ns").shift(1).over("rank")
    overlaps = steps.filter(pl.col("start_ns") < prev_end).height
    if overlaps:
        warnings.append(Notice.of(
            "rocprof.marker_overlap", "{n} steps from --step-marker {pattern!r} overlap the "
            "previous step (nested or concurrent ranges?): an event counts in the later one",
            n=overlaps, pattern=pattern))
    return steps, warnings
