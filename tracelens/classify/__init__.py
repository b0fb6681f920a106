"""The kernel classifier (docs/definitions.md#categories): one ordered rule list, from data, for
every trace format.

The list runs in layers: library rules (vendor and framework kernel names, HLO ops), then the
words inside a name, then the op that launched the kernel where the trace records one (Kineto's
ATen op), then ``other``; the first rule that matches decides.

``classify`` labels each event with a category, a subcategory and the id of the deciding rule;
``explain`` says why one kernel name got its category. The rules run as polars expressions over
the distinct ``(kind, name, op, hlo)`` combinations, and the answers are joined back onto the
frame.
"""

from __future__ import annotations

import polars as pl

from tracelens.classify.rules import LAYERS, Match, Rule, RuleSet, words_of
from tracelens.classify.loading import load_rules
from tracelens.core.model import CategoryDtype, Text
from tracelens.core.signatures import Signatures, distinct_rows

__all__ = ["LAYERS", "Match", "Rule", "RuleSet", "TPU_SIGNAL", "classify", "explain",
           "load_rules", "words_of"]

TPU_SIGNAL = "tpu:"
"""A TPU op's HLO signal is this prefix and XLA's category of the op (``tpu:loop fusion``):
the rules' TPU block matches it; no GPU kernel's signal starts so."""

_KEYS = ("__cls_kind", "__cls_name", "__cls_op", "__cls_hlo")
_COLUMNS = ("kind", "name", "op", "hlo")  # what RuleSet.decide reads


def classify(events: pl.DataFrame, rules: RuleSet | None = None,
             signed: tuple[Signatures, pl.Series] | None = None) -> pl.DataFrame:
    """Return ``events`` with ``category``, ``subcategory`` and ``rule`` filled on every row.

    Row order and all other columns are kept. The subcategory is the rule's when it gives one,
    else the event's existing value (e.g. a memcpy's ``h2d`` or an RCCL type from the parser).
    ``signed``: the events' :class:`~tracelens.core.signatures.Signatures` and the HLO signal of
    each signature (the loader's): the rules then run on the signatures' distinct rows and
    the answers are spread by the events' signature; else on the events' own ``hlo``.
    """
    rules = rules if rules is not None else load_rules()
    for col in ("kind", "name"):
        if col not in events.columns:
            raise ValueError(f"classify: events frame has no {col!r} column")
    source = events if signed is None else signed[0].table.with_columns(signed[1].alias("hlo"))
    op = pl.col("op") if "op" in source.columns else pl.lit(None, dtype=pl.String)
    hlo = pl.col("hlo") if "hlo" in source.columns else pl.lit(None, dtype=pl.String)
    keys = source.select(
        pl.col("kind").alias(_KEYS[0]), pl.col("name").alias(_KEYS[1]), op.alias(_KEYS[2]),
        hlo.alias(_KEYS[3]))
    distinct, combo = distinct_rows(keys)
    if signed is not None:  # each signature's combination, then each event's
        combo = signed[0].spread(combo)
    index, new_sub = rules.decide(distinct.rename(dict(zip(_KEYS, _COLUMNS))))
    every = (*rules.rules, rules.fallback)
    categories = pl.Series("category", [r.category for r in every], dtype=CategoryDtype)
    rule_ids = pl.Series("rule", [r.id for r in every], dtype=Text)
    index = index.gather(combo)

    # encoded on the distinct rows, then spread (a gather of 4-byte codes)
    new_sub = new_sub.cast(Text).gather(combo).alias("subcategory")
    if "subcategory" in events.columns:
        subcategory = pl.coalesce(pl.lit(new_sub), pl.col("subcategory").cast(Text))
    else:
        subcategory = pl.lit(new_sub)
    return events.with_columns(
        pl.lit(categories.gather(index)),
        subcategory.alias("subcategory"),
        pl.lit(rule_ids.gather(index)),
    )


def explain(name: str, op: str | None = None, kind: str = "kernel",
            rules: RuleSet | None = None, hlo: str | None = None) -> Match:
    """Which rule decides this kernel, with its reason and conditions (``tracelens explain``).

    It runs the same expressions as :func:`classify`, on a one-row frame.
    """
    rules = rules if rules is not None else load_rules()
    rule, sub = rules.decide_one(kind, name, op, hlo)
    words, found = None, ()
    if rule.word_source is not None:  # the words it read, and what each condition found
        text = pl.lit(name if rule.word_source == "name" else op, dtype=pl.String)
        row = pl.select(words_of(text).alias("w"))
        words = row["w"][0]
        found = tuple(row.select(pl.col("w").str.extract(p, 1))[0, 0]
                      for p in rule.word_patterns)
    return Match(
        category=rule.category,
        subcategory=sub,
        rule_id=rule.id,
        description=rule.description,
        conditions=dict(rule.conditions),
        layer=rule.layer,
        words=words,
        found=found,
    )
