"""The kernel classifier (DESIGN §5): one ordered rule list, from data, for every trace format.

``classify`` labels each event with a category, a subcategory and the id of the deciding rule;
``explain`` says why one kernel name got its category. Regexes run once per distinct
``(kind, name, op)`` combination, and the answers are joined back onto the frame.
"""

from __future__ import annotations

import polars as pl

from tracelens.classify.rules import Match, Rule, RuleSet, load_rules
from tracelens.model import CategoryDtype

__all__ = ["Match", "Rule", "RuleSet", "classify", "explain", "load_rules"]

_KEYS = ("__cls_kind", "__cls_name", "__cls_op")


def classify(events: pl.DataFrame, rules: RuleSet | None = None) -> pl.DataFrame:
    """Return ``events`` with ``category``, ``subcategory`` and ``rule`` filled on every row.

    Row order and all other columns are kept. The subcategory is the rule's when it gives one,
    else the event's existing value (e.g. a memcpy's ``h2d`` or an RCCL type from the parser).
    """
    rules = rules if rules is not None else load_rules()
    for col in ("kind", "name"):
        if col not in events.columns:
            raise ValueError(f"classify: events frame has no {col!r} column")
    op = pl.col("op") if "op" in events.columns else pl.lit(None, dtype=pl.String)
    keys = events.select(
        pl.col("kind").alias(_KEYS[0]), pl.col("name").alias(_KEYS[1]), op.alias(_KEYS[2]))
    distinct = keys.unique()

    categories: list[str] = []
    subcategories: list[str | None] = []
    rule_ids: list[str] = []
    for kind, name, op_name in distinct.iter_rows():
        rule = rules.match(None if kind is None else str(kind), name, op_name)
        categories.append(rule.category)
        subcategories.append(rule.subcategory_for(name, op_name))
        rule_ids.append(rule.id)
    lookup = distinct.with_columns(
        pl.Series("__cls_category", categories, dtype=CategoryDtype),
        pl.Series("__cls_sub", subcategories, dtype=pl.String),
        pl.Series("__cls_rule", rule_ids, dtype=pl.String),
    )
    labels = keys.join(lookup, on=list(_KEYS), how="left", nulls_equal=True,
                       maintain_order="left")

    new_sub = labels["__cls_sub"]
    if "subcategory" in events.columns:
        subcategory = pl.coalesce(pl.lit(new_sub), pl.col("subcategory").cast(pl.String))
    else:
        subcategory = pl.lit(new_sub)
    return events.with_columns(
        pl.lit(labels["__cls_category"]).alias("category"),
        subcategory.alias("subcategory"),
        pl.lit(labels["__cls_rule"]).alias("rule"),
    )


def explain(name: str, op: str | None = None, kind: str = "kernel",
            rules: RuleSet | None = None) -> Match:
    """Which rule decides this kernel, with its reason and conditions (``tracelens explain``)."""
    rules = rules if rules is not None else load_rules()
    rule = rules.match(kind, name, op)
    return Match(
        category=rule.category,
        subcategory=rule.subcategory_for(name, op),
        rule_id=rule.id,
        description=rule.description,
        conditions=dict(rule.conditions),
    )
