"""Joining summary partials: :func:`concat_partials` (parts of one job already on one clock,
distinct ranks) and :func:`merge_partials`, the partial-level twin of
:func:`tracelens.loading.combine.combine` and the loader's later stages for hosts loaded one by one
(rank renumbering, duplicate host names, clock shifts, the warnings the loader computes on the
combined trace)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence

import polars as pl

from tracelens.analyze.summary.packed import PackedPrograms, is_packed, strings_back, unpack_summary
from tracelens.analyze.compute.roofline import roofline_bounds
from tracelens.core.model import CATEGORIES, Notice
from tracelens.core.notices import (CLIPPED, NESTED, clipped, clipped_total, nested, nested_total,
                               unique)
from tracelens.loading.steps import ORDERED_LAST

if TYPE_CHECKING:
    from tracelens.analyze.compute.hlo_findings import LensTimeline
    from tracelens.analyze.summary.types import SummaryPartial
    from tracelens.loading.combine import PartFacts
    from tracelens.core.model import Trace


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    frames = [f for f in frames if f.width]
    return pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]


def concat_partials(partials: list["SummaryPartial"]) -> "SummaryPartial":
    """One partial of several whose ranks are distinct and whose times share one clock:
    frames concatenated in order, counts summed, roofline groups re-merged, notices
    de-duplicated in order; meta facts (alignment, steps source, filters) from the first."""
    from tracelens.analyze.compute.hlo_findings import concat_lens

    first = partials[0]
    return replace(
        first,
        inputs=tuple(i for p in partials for i in p.inputs),
        notices=tuple(unique(n for p in partials for n in p.notices)),
        devices=_concat([p.devices for p in partials]),
        steps=_concat([p.steps for p in partials]),
        device_rows=tuple(sorted((d for p in partials for d in p.device_rows),
                                 key=lambda d: (d.rank, d.device))),
        kernels=_concat([p.kernels for p in partials]),
        kernel_ns=sum(p.kernel_ns for p in partials),
        specs=_concat([p.specs for p in partials]),
        roofline=merge_roofline(partials),
        roofline_mix=_concat([p.roofline_mix for p in partials]),
        gaps=_concat([p.gaps for p in partials]),
        no_cost_data=sum(p.no_cost_data for p in partials),
        no_cost_data_ns=sum(p.no_cost_data_ns for p in partials),
        acts=_concat([p.acts for p in partials]),
        hlo=concat_lens([lens_of(p) for p in partials]),
        hosts_named=all(p.hosts_named for p in partials),
        world_sizes=tuple(sorted({w for p in partials for w in p.world_sizes})),
    )


def lens_of(p: "SummaryPartial") -> "LensTimeline | None":
    """The partial's HLO lens inputs with their activity rows (taken from ``p.acts`` where
    the partial left them out, see ``summary._lens``)."""
    if p.hlo is None or p.hlo.acts is not None:
        return p.hlo
    from tracelens.analyze.compute.hlo_findings import lens_activities

    # text columns stay dictionary-encoded, as in one process (tracelens.core.model.Text)
    return replace(p.hlo, acts=lens_activities(p.acts))


def merge_roofline(partials: list["SummaryPartial"]) -> pl.DataFrame:
    """The roofline of several partials' op groups, as one pass over all their kernels
    gives it: counts, time, FLOPs and bytes summed per (op, program, spec), the first known
    module, the longest kernel name (ties: the smallest), the most common category (ties: the
    first in CATEGORIES) and dtype (ties: the smallest)."""
    frames = [p.roofline for p in partials if p.roofline.height]
    if len(frames) <= 1:
        return frames[0] if frames else partials[0].roofline
    keys = ["_group", "program_id", "spec"]
    rows = pl.concat([f.select("op", "program_id", "spec", "module", "count", "sum_ns",
                               "flops", "bytes", "no_cost_count") for f in frames],
                     how="vertical_relaxed").rename({"op": "_group"})
    agg = rows.group_by(keys, maintain_order=True).agg(
        module=pl.col("module").drop_nulls().first(), count=pl.col("count").sum(),
        sum_ns=pl.col("sum_ns").sum(),
        flops=pl.when(pl.col("flops").is_not_null().any()).then(pl.col("flops").sum()),
        bytes=pl.when(pl.col("bytes").is_not_null().any()).then(pl.col("bytes").sum()),
        no_cost_count=pl.col("no_cost_count").sum())
    mix = pl.concat([p.roofline_mix for p in partials], how="vertical_relaxed") \
        .rename({"op": "_group"})
    kernel = (mix.group_by(*keys, "name").agg(pl.col("sum_ns").sum())
              .sort(["sum_ns", "name"], descending=[True, False])
              .group_by(keys, maintain_order=True).agg(kernel=pl.col("name").first()))
    order = {c: i for i, c in enumerate(CATEGORIES)}
    category = (mix.group_by(*keys, "category").agg(pl.col("count").sum())
                .with_columns(_o=pl.col("category").replace_strict(order, default=len(order)))
                .sort(["count", "_o"], descending=[True, False])
                .group_by(keys, maintain_order=True).agg(category=pl.col("category").first()))
    dtype = (mix.filter(pl.col("dtype").is_not_null())
             .group_by(*keys, "dtype").agg(pl.col("count").sum())
             .sort(["count", "dtype"], descending=[True, False])
             .group_by(keys, maintain_order=True).agg(dtype=pl.col("dtype").first()))
    agg = agg.join(kernel, on=keys, how="left", nulls_equal=True) \
        .join(category, on=keys, how="left", nulls_equal=True) \
        .join(dtype, on=keys, how="left", nulls_equal=True)
    specs = _concat([p.specs for p in partials]).unique("spec", keep="first",
                                                         maintain_order=True)
    return roofline_bounds(agg, specs)


def file_facts(trace: "Trace") -> "PartFacts":
    """What :func:`tracelens.loading.combine.combine` reads from a trace of one file."""
    from tracelens.loading.combine import part_facts
    return part_facts(trace.meta)


def merge_partials(partials: list["SummaryPartial"], shifts: dict[str, int] | None = None,
                   alignment: str | None = None) -> "SummaryPartial":
    """The partial of the job whose files the ``partials`` were read from one by one (each
    ``summary_partial(load([file]))``, in the order ``load(files)`` would take them), as
    ``summary_partial(load(files))`` computes it: each part's ranks after the previous
    parts', a host name two single-host files share renamed ``host#i``, times shifted onto
    one clock, the warnings the loader computes on the combined trace rebuilt.

    Clocks: by default the wall-clock profile start of each XSpace host, as
    :mod:`tracelens.loading.combine` does. ``shifts`` (ns to add, per final host name) with the
    ``alignment`` text replace that, e.g. the per-host offsets from collective ends
    (:mod:`tracelens.loading.align`); without them hosts that cannot be put on wall-clock stay
    unaligned and warned about (the loader would first try collective ends).
    """
    from tracelens.loading.combine import plan_facts

    facts = [p.host_facts for p in partials]
    if not partials or any(f is None for f in facts):
        raise ValueError("merge_partials needs partials of traces read from one file each")
    how = plan_facts(facts)  # type: ignore[arg-type]
    text, unaligned = how.alignment, how.unaligned
    if shifts is not None:
        if alignment is None:
            raise ValueError("merge_partials: shifts need the alignment text that says how")
        text, unaligned = alignment, None
    if len(partials) == 1:
        return replace(unpack_summary(partials[0]), alignment=text)
    moved, programs, strings = [], None, set()
    held = _Held()
    # every host's lens rows are its activity rows' columns: taken from the joined rows
    defer = all(p.hlo is not None and p.hlo.acts is None for p in partials)
    blocks: list[pl.DataFrame] = []
    pending: list[pl.DataFrame] = []
    for i, (p, f, where) in enumerate(zip(partials, facts, how.placements)):
        hosts = [where.host] if where.host else [h or f"host{i}" for h in f.hosts]
        by_host = {h: int(shifts.get(h, 0)) if shifts is not None else where.shift_ns
                   for h in hosts}
        p = _programs_apart(p, held)  # (before unpacking: see _programs_apart)
        if is_packed(p):  # one host unpacked at a time, its strings left Categorical
            strings.update(p.acts.strings)
            p = unpack_summary(p, strings=False)
        m = _relabel(p, where.rank_offset, where.host, by_host)
        if not defer:  # its own lens rows, taken before its acts move on
            m = replace(m, hlo=lens_of(m))
        if m.hlo is not None:  # the job's programs folded as they come (see _fold_programs)
            programs = _fold_programs(programs, m.hlo.programs)
            held.keep(programs)
            m = replace(m, hlo=replace(m.hlo, programs=_programs_back(
                _empty(m.hlo.programs), held)))
        # activity rows joined in blocks of hosts as they come (in input order): a few
        # contiguous frames instead of one small one per host
        pending.append(m.acts)
        if len(pending) == _BLOCK:
            blocks, pending = [*blocks, _concat(pending).rechunk()], []
        moved.append(replace(m, acts=_empty(m.acts)))
    out = concat_partials(moved)
    del moved
    cols = sorted(strings)
    acts = _concat([*blocks, *pending])
    del blocks, pending
    # deferred: the lens rows are taken from the joined rows when the lens runs (lens_of),
    # after the collectives reduce has freed its memory
    lens_acts = None if defer or out.hlo is None else out.hlo.acts
    hlo = out.hlo if out.hlo is None else replace(
        out.hlo, programs=programs if programs is None else _programs_back(programs, held),
        acts=None if lens_acts is None else strings_back(lens_acts, cols))
    # the activity rows keep their strings Categorical: the collectives reduce gives the
    # same result on them (its sorts on strings are lexical either way), in less memory
    acts = acts.drop(_NOT_REDUCED, strict=False)
    return replace(out, alignment=text, host_facts=None, hlo=hlo, acts=acts,
                   notices=merged_notices([p.notices for p in partials], unaligned))


def _empty(df: pl.DataFrame) -> pl.DataFrame:
    """``df``'s columns without rows or buffers (``head(0)`` and ``clear()`` are slices that
    keep the whole buffers alive)."""
    return pl.DataFrame(schema=df.schema)


_BLOCK = 16  # hosts' activity rows per contiguous block in merge_partials
_NOT_REDUCED = ("stream", "end_ns", "algbw_gb_per_s")
"""Activity columns the summary's reduce does not read (the collectives reduce and the HLO
lens read the others): dropped from a merged partial, 2 M rows for 128 hosts."""


def _fold_programs(running: pl.DataFrame | None, more: pl.DataFrame) -> pl.DataFrame:
    """``program_protos`` of two parts' programs (rows of :func:`_programs_apart`): each
    program's row of the first host in name order, the same whether all parts are joined at
    once or one after the other (a placed host name is in one part only), so each host's
    copy of a program can go as soon as it has been compared."""
    from tracelens.analyze.compute.hlo_findings import program_protos

    return more if running is None else program_protos(_concat([running, more]), _PROTO)


_PROTO = "_proto"
"""A program row's number in the merge's :class:`_Held` program bytes."""


@dataclass
class _Held:
    """The program bytes of the hosts' rows (:func:`_programs_apart`) by row number, and
    the programs table's columns in order."""

    protos: dict[int, bytes] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    count: int = 0  # row numbers given so far

    def keep(self, rows: pl.DataFrame) -> None:
        """Only the bytes of ``rows`` (what the fold kept) stay held."""
        self.protos = {i: self.protos[i] for i in rows[_PROTO].drop_nulls().to_list()}


def _programs_apart(p: "SummaryPartial", held: _Held) -> "SummaryPartial":
    """``p`` with its HLO programs' bytes kept aside in ``held``, each row numbering its
    own (``_PROTO``): the fold compares rows, and the bytes of the rows it keeps go into a
    frame once, at the end. Every host sends the job's programs (a packed part shares one
    bytes object per program); put in a frame on each host's unpacking and copied again by
    each fold, 128 hosts' copies of a 0.7 MB program cost the merge +240 MB and 1.6 s."""
    if p.hlo is None:
        return p
    progs = p.hlo.programs
    if isinstance(progs, PackedPrograms):
        rows, order = progs.rows.frame(), progs.order
        blobs = [None if b is None else b.data for b in progs.protos]
    else:
        rows, order = progs.drop("hlo_proto", strict=False), tuple(progs.columns)
        blobs = progs["hlo_proto"].to_list() if "hlo_proto" in progs.columns else \
            [None] * progs.height
    numbers: list[int | None] = []
    for b in blobs:
        numbers.append(None if b is None else held.count)
        if b is not None:
            held.protos[held.count] = b
        held.count += 1
    held.order = held.order or order
    rows = rows.with_columns(pl.Series(_PROTO, numbers, pl.Int64))
    return replace(p, hlo=replace(p.hlo, programs=rows))


def _programs_back(rows: pl.DataFrame, held: _Held) -> pl.DataFrame:
    """The programs table of :func:`_programs_apart`'s ``rows``: their bytes put back."""
    blobs = pl.Series("hlo_proto", [None if i is None else held.protos[i]
                                    for i in rows[_PROTO].to_list()], pl.Binary)
    return rows.with_columns(blobs).select(held.order)


def merged_notices(per_file: Sequence[Sequence[Notice]], unaligned: Notice | None = None
                   ) -> tuple[Notice, ...]:
    """The readers' notices of every part (``per_file``: each file's, read alone; once each,
    in order), then the stages' as loading all files at once raises them: the clipped
    overlaps counted over all parts (summed from each part's own clip notice), the hosts
    left unaligned, then the step marking's (:data:`tracelens.loading.steps.ORDERED_LAST`)."""
    flat = [n for notices in per_file for n in notices]
    readers = unique(n for n in flat if n.code not in (CLIPPED, NESTED)
                     and n.code not in ORDERED_LAST)
    n_clip, largest = clipped_total(flat)
    stage = [clipped(n_clip, largest)] if n_clip else []
    n_nest, names = nested_total(flat)
    stage += [nested(n_nest, names)] if n_nest else []
    stage += [unaligned] if unaligned else []
    steps = unique(n for n in flat if n.code in ORDERED_LAST)
    return tuple(readers + [n for n in stage if n not in readers] + steps)


def _relabel(p: "SummaryPartial", offset: int, rename: str | None,
             shift: dict[str, int]) -> "SummaryPartial":
    """``p`` with its ranks after ``offset``, its host renamed and its times shifted (ns per
    final host name)."""
    def frame(df: pl.DataFrame) -> pl.DataFrame:
        cols: dict[str, pl.Expr] = {}
        if "rank" in df.columns:
            cols["rank"] = (pl.col("rank") + offset).cast(pl.Int32)
        if "host" in df.columns and rename is not None:
            cols["host"] = pl.lit(rename, df.schema["host"])
        out = df.with_columns(**cols) if cols else df
        if "start_ns" in df.columns and "host" in df.columns and any(shift.values()):
            by = pl.col("host").cast(pl.String).replace_strict(shift, default=0,
                                                                return_dtype=pl.Int64)
            out = out.with_columns(start_ns=pl.col("start_ns") + by,
                                   end_ns=pl.col("end_ns") + by)
        return out

    rank_host = {r: rename or h for h, r in p.devices.select("host", "rank").unique().rows()}
    steps = p.steps.with_columns(rank=(pl.col("rank") + offset).cast(pl.Int32))
    if any(shift.values()):
        by_rank = {r + offset: shift.get(h, 0) for r, h in rank_host.items()}
        by = pl.col("rank").replace_strict(by_rank, default=0, return_dtype=pl.Int64)
        steps = steps.with_columns(start_ns=pl.col("start_ns") + by,
                                   end_ns=pl.col("end_ns") + by)
    rows = []
    for d in p.device_rows:
        host = rename or d.host
        s = shift.get(host, 0)
        rows.append(replace(d, host=host, rank=d.rank + offset, steps=tuple(
            replace(st, start_ns=st.start_ns + s, end_ns=st.end_ns + s) for st in d.steps)))
    hlo = p.hlo if p.hlo is None else replace(
        p.hlo, programs=frame(p.hlo.programs), gpus=frame(p.hlo.gpus),
        compute=frame(p.hlo.compute),
        acts=None if p.hlo.acts is None else frame(p.hlo.acts),
        hosts=tuple(sorted({rename or h for h in p.hlo.hosts})))
    return replace(p, devices=frame(p.devices), steps=steps, device_rows=tuple(rows), hlo=hlo,
                   kernels=frame(p.kernels), specs=frame(p.specs), acts=frame(p.acts))
