"""Loading, validating and matching classification rules (the format is documented in rules.toml).

Rules are data so that users can extend them (``--rules``) and so that every decision carries
the id and one-sentence reason of the rule that made it. The built-in rules come in layers
(:data:`LAYERS`): library rules (vendor and framework names, HLO ops), then the words inside
a name (``per_token_cast_to_fp8`` says quantize), then the op that launched the kernel
(``aten::silu``), then ``other``; a word rule reads the text split into lowercase words
(:func:`words_of`), so ``sum`` never fires inside ``consume``. They run as polars expressions (Rust
``regex``) over whole columns of distinct names; ``explain`` runs the same expressions on one
row (a test holds the two to the same answer on every real trace's names). Patterns the Rust
dialect refuses (look-around, backreferences) are refused when the rules load, naming the rule.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import numpy as np
import polars as pl

BUILTIN_NAME = "rules.toml"
BUILTIN_PATH = f"<builtin {BUILTIN_NAME}>"  # the packaged rules' name in messages
FALLBACK_ID = "other.fallback"
TEXT_KEYS = ("name", "op", "hlo")  # the texts a rule's regexes search, and the frame's columns
WORD_KEYS = ("words", "and_words", "not_words")  # word conditions, on the words of words_in
POSITIVE_KEYS = ("kind", *TEXT_KEYS, "words")
NEGATIVE_KEYS = tuple(f"not_{k}" for k in TEXT_KEYS)
CONDITION_KEYS = (*POSITIVE_KEYS, *NEGATIVE_KEYS, "and_words", "not_words", "words_in")
RULE_KEYS = frozenset(
    {"id", "category", "description", "subcategory", "subcategory_from", "subcategory_map",
     *CONDITION_KEYS})
WORD_SOURCES = ("name", "op")  # the texts word conditions may read (words_in)
WORDS_COLUMN = {"name": "__words_name", "op": "__words_op"}  # their words, as rows get them
# The built-in layers in the order they run (a user file's rules run before all: "user").
LAYERS = ("library", "name words", "launching op", "fallback")
USER_LAYER = "user"
_WORD_ENTRY = r"^(?:\*?[a-z]+\*?|[0-9]+)(?: (?:\*?[a-z]+\*?|[0-9]+))*$"
SUBCATEGORY_SOURCES = TEXT_KEYS  # subcategory_from may read the op, the name or the HLO kind

SubMap = tuple[tuple[str, str], ...]  # ordered (Rust regex, value) pairs


@dataclass(frozen=True)
class Match:
    """Why one (kind, name, op) got its category: the answer of :func:`explain`."""

    category: str
    subcategory: str | None
    rule_id: str
    description: str
    conditions: dict[str, Any]
    layer: str = "library"  # LAYERS, or "user" for a --rules file's rule
    words: str | None = None  # the words the deciding word rule read (name or op)
    found: tuple[str, ...] = ()  # the words of each of its word conditions it found there


# A demangled name's parameter list (one level of nested parentheses): argument types say
# what a kernel takes, not what it does (``index_t``, ``long const*``), so words skip it.
_PARAMETERS = r"\((?:[^()]|\([^()]*\))*\)\s*(?:const\s*)?$"


def words_of(text: pl.Expr) -> pl.Expr:
    """The words of a kernel or op name, lowercase and one space apart: split on every
    character that is not a letter or digit (``_``, ``::``, template brackets, ``.``), at
    camelCase (``RMSNorm`` -> ``rms norm``) and between letters and digits (``fp8`` ->
    ``fp 8``), without a demangled name's trailing parameter list. Mangled names split too
    (``_ZN7sgl_hip10activation18act_and_mul`` -> ``zn 7 sgl hip 10 activation 18 act and
    mul``). Word rules match whole words of this text, never parts of one."""
    return (text.str.replace(_PARAMETERS, "")
            .str.replace_all(r"([a-z0-9])([A-Z])", "${1} ${2}")
            .str.replace_all(r"([A-Z]+)([A-Z][a-z])", "${1} ${2}")
            .str.replace_all(r"([A-Za-z])([0-9])", "${1} ${2}")
            .str.replace_all(r"([0-9])([A-Za-z])", "${1} ${2}")
            .str.to_lowercase()
            .str.replace_all(r"[^a-z0-9]+", " ")
            .str.strip_chars(" "))


def _with_words(frame: pl.DataFrame, sources: Iterable[str]) -> pl.DataFrame:
    """``frame`` with the words of each of ``sources`` (name, op) it lacks."""
    new = [words_of(pl.col(s)).alias(WORDS_COLUMN[s]) for s in sorted(set(sources))
           if WORDS_COLUMN[s] not in frame.columns]
    return frame.with_columns(new) if new else frame


def _found(column: str, pattern: str) -> pl.Expr:
    """``pattern`` is found in the column; a missing value gives null (never a match)."""
    return pl.col(column).str.contains(pattern)


@dataclass(frozen=True, eq=False)  # identity equality/hash: usable as a cache key
class Rule:
    """One validated rule. Regexes are kept as text in the Rust ``regex`` dialect that polars
    runs; ``conditions`` keeps the match conditions exactly as written."""

    id: str
    category: str
    description: str
    conditions: dict[str, Any]
    kinds: frozenset[str] | None = None
    name: str | None = None
    op: str | None = None
    hlo: str | None = None
    excludes: tuple[tuple[str, str], ...] = ()  # (column, regex) pairs from not_name/op/hlo
    subcategory: str | None = None
    subcategory_from: tuple[str, ...] = ()
    subcategory_map: SubMap = ()
    source: str = ""
    word_source: str | None = None  # "name" or "op": the text whose words it reads
    word_patterns: tuple[str, ...] = ()  # regexes over those words, all found (words, and_words)
    layer: str = "library"

    def condition(self) -> pl.Expr:
        """All conditions hold (AND), as an expression over the columns kind, name, op, hlo.

        A missing value never satisfies a condition on it (the result is null or false); a
        missing value never triggers an exclusion either.
        """
        parts: list[pl.Expr] = []
        if self.kinds is not None:
            parts.append(pl.col("kind").is_in(sorted(self.kinds)))
        parts += [_found(col, pat) for col, pat in
                  (("name", self.name), ("op", self.op), ("hlo", self.hlo)) if pat is not None]
        if self.word_source is not None:
            parts += [_found(WORDS_COLUMN[self.word_source], pat) for pat in self.word_patterns]
        parts += [~_found(col, pat).fill_null(False) for col, pat in self.excludes]
        if not parts:
            return pl.lit(True)
        return pl.all_horizontal(parts)

    def subcategory_expr(self) -> pl.Expr:
        """The first map hit over the ``subcategory_from`` texts, else the literal value."""
        hits = [pl.when(_found(source, pattern)).then(pl.lit(value, dtype=pl.String))
                for source in self.subcategory_from for pattern, value in self.subcategory_map]
        return pl.coalesce(*hits, pl.lit(self.subcategory, dtype=pl.String))


_FEW_ROWS = 32  # up to this many rows, all conditions run in one query (see RuleSet.decide)
_KNOWN_ROWS = 1_000_000  # distinct rows whose answers a RuleSet keeps
_INPUT_SCHEMA = {"kind": pl.String, "name": pl.String, "op": pl.String, "hlo": pl.String}


@dataclass(frozen=True, eq=False)
class RuleSet:
    """An ordered list of rules; the first rule that matches decides."""

    rules: tuple[Rule, ...]
    sources: tuple[str, ...] = ()
    _fallback: Rule = field(init=False, repr=False, compare=False)
    # the answers given so far: kind, name, op, hlo, rule (UInt32), subcategory (decide)
    _known: pl.DataFrame | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fallback = next((r for r in self.rules if r.id == FALLBACK_ID), None)
        if fallback is None:  # a hand-built set still labels every event
            fallback = Rule(FALLBACK_ID, "other", "No rule recognised this kernel.", {})
        object.__setattr__(self, "_fallback", fallback)
        object.__setattr__(self, "_known", None)

    @property
    def fallback(self) -> Rule:
        """The rule that labels what no rule matches."""
        return self._fallback

    def decide(self, keys: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
        """For each row of ``keys`` (String columns kind, name, op, hlo; distinct rows): the
        index of the deciding rule in ``self.rules`` (``len(self.rules)`` for the fallback
        when it is not one of them) and the subcategory that rule gives (null when it gives
        none).

        The answers are kept: the host files of one job name the same kernels, and one process
        classifies every host it reads (in one process or on an engine worker), so a row seen
        before is looked up (one join) instead of run through the rules again (up to
        ``_KNOWN_ROWS`` rows, then the memory starts anew). See :meth:`_decide_rows` for the
        rules themselves."""
        keys = keys.select(pl.col(c).cast(t) for c, t in _INPUT_SCHEMA.items())
        if keys.height <= _FEW_ROWS:
            return self._decide_rows(keys)
        known = self._known
        if known is None:
            index, sub = self._decide_rows(keys)
            self._remember(keys, index, sub)
            return index, sub
        found = keys.join(known, on=list(_INPUT_SCHEMA), how="left", nulls_equal=True,
                          maintain_order="left")
        new = found["rule"].is_null()
        if not new.any():
            return found["rule"].rename("rule"), found["subcategory"]
        rows = new.arg_true()
        index, sub = self._decide_rows(keys[rows])
        self._remember(keys[rows], index, sub)
        return (found["rule"].scatter(rows, index).rename("rule"),
                found["subcategory"].scatter(rows, sub))

    def _remember(self, keys: pl.DataFrame, index: pl.Series, sub: pl.Series) -> None:
        new = keys.with_columns(rule=index.cast(pl.UInt32), subcategory=sub.cast(pl.String)) \
            .unique(list(_INPUT_SCHEMA), keep="first", maintain_order=True)
        known = self._known
        if known is not None and known.height + new.height <= _KNOWN_ROWS:
            new = pl.concat([known, new])
        object.__setattr__(self, "_known", new.rechunk())

    def _decide_rows(self, keys: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
        """:meth:`decide` without the memory of earlier answers.

        Rules are tried in order, each as one Rust-regex pass over the rows that no earlier rule
        matched (so the first matching rule wins, and common names stop early); on a few rows
        (``explain``) one query evaluates every condition and takes the first true one.
        Subcategory maps run only on the rows of the rules that use them.
        """
        fallback = self.rules.index(self._fallback) if self._fallback in self.rules \
            else len(self.rules)
        if keys.height <= _FEW_ROWS:  # one query beats one per rule (explain, tiny traces)
            keys = _with_words(keys, {r.word_source for r in self.rules if r.word_source})
            first = pl.coalesce(
                *(pl.when(rule.condition()).then(pl.lit(i, dtype=pl.UInt32))
                  for i, rule in enumerate(self.rules)),
                pl.lit(fallback, dtype=pl.UInt32))
            index = keys.select(first.alias("rule"))["rule"]
        else:
            found = np.full(keys.height, fallback, dtype=np.uint32)
            rest = keys.with_row_index("__row")  # the rows no rule has matched yet
            for lo, hi, column, pattern in _name_runs(self.rules):
                if rest.height == 0:
                    break
                # the words of the names (ops) only for the rows that reach a word rule
                rest = _with_words(rest, {r.word_source for r in self.rules[lo:hi]
                                          if r.word_source})
                # rows matching none of the run's patterns skip the run's rules
                cand = rest if pattern is None else rest.filter(
                    pl.col(column).str.contains(pattern).fill_null(False))
                matched = []
                for i in range(lo, hi):
                    if cand.height == 0:
                        break
                    hit = cand.select(self.rules[i].condition().fill_null(False))[:, 0]
                    rows = cand["__row"].filter(hit)
                    found[rows.to_numpy()] = i
                    matched.append(rows)
                    cand = cand.filter(~hit)
                if matched:
                    done = np.zeros(keys.height, bool)
                    done[pl.concat(matched).to_numpy()] = True
                    rest = rest.filter(~pl.Series(done).gather(rest["__row"]))
            index = pl.Series("rule", found)
        every = (*self.rules, self._fallback)
        literal = pl.Series("subcategory", [r.subcategory for r in every], dtype=pl.String)
        sub = literal.gather(index)
        used = sorted(set(index.unique().to_list()))
        for i in used:
            rule = every[i]
            if not rule.subcategory_from:
                continue
            rows = (index == i).arg_true()
            values = keys[rows].select(rule.subcategory_expr().alias("s"))["s"]
            sub = sub.scatter(rows, values)
        return index, sub

    def decide_one(self, kind: str | None, name: str | None, op: str | None,
                   hlo: str | None = None) -> tuple[Rule, str | None]:
        """The deciding rule and its subcategory for one combination: :meth:`decide` on a
        one-row frame (what ``explain`` answers)."""
        row = pl.DataFrame({"kind": [kind], "name": [name], "op": [op], "hlo": [hlo]},
                           schema=_INPUT_SCHEMA)
        index, sub = self.decide(row)
        return (*self.rules, self._fallback)[index[0]], sub[0]

    def match(self, kind: str | None, name: str | None, op: str | None,
              hlo: str | None = None) -> Rule:
        """The rule deciding this one combination."""
        return self.decide_one(kind, name, op, hlo)[0]

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __getitem__(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)


_RUN_MIN, _RUN_MAX = 4, 8  # consecutive name rules put behind one combined pattern


def _key(rule: Rule) -> tuple[str, str] | None:
    """A text column and a regex every row the rule matches has there: its name pattern, or
    its first word pattern (on the words of its text); None when it needs neither."""
    if rule.name is not None:
        return "name", rule.name
    if rule.word_source is not None:
        return WORDS_COLUMN[rule.word_source], rule.word_patterns[0]
    return None


@functools.lru_cache(maxsize=64)
def _name_runs(rules: tuple[Rule, ...]) -> tuple[tuple[int, int, str | None, str | None], ...]:
    """The rules as runs ``(first, end, column, pattern)``: runs of ``_RUN_MIN`` to
    ``_RUN_MAX`` consecutive rules that each need a match in the same column (the ``name``
    pattern of a name rule, the first word list of a word rule: :func:`_key`) get the
    alternation of those patterns (short runs: a run some names do match still skips the rest
    for the others; a name matching none of them cannot satisfy any rule of the run, so one
    regex pass sends most rows past the run: 150k distinct kernel names would otherwise take
    ~40 passes before the GEMM rules, and ~30 more through the word layers); other rules are
    runs of one without a pattern. First match still wins: the rows a run's pattern keeps go
    through its rules in order. A combination Rust ``regex`` refuses (its size limit) is not
    used."""
    out: list[tuple[int, int, str | None, str | None]] = []
    keys = [_key(r) for r in rules]
    i = 0
    while i < len(rules):
        j = i
        col = keys[i][0] if keys[i] is not None else None
        while j < len(rules) and col is not None and keys[j] is not None and keys[j][0] == col:
            j += 1
        if j - i >= _RUN_MIN:
            for a in range(i, j, _RUN_MAX):
                b = min(j, a + _RUN_MAX)
                pattern = "|".join(f"(?:{keys[k][1]})" for k in range(a, b))  # type: ignore[index]
                ok = _regex_problem(pattern) is None
                out += [(a, b, col, pattern)] if ok else [(k, k + 1, None, None)
                                                          for k in range(a, b)]
            i = j
        else:
            out += [(k, k + 1, None, None) for k in range(i, max(j, i + 1))]
            i = max(j, i + 1)
    return tuple(out)


def _regex_problem(pattern: str) -> str | None:
    """Why Rust ``regex`` (what polars runs) refuses ``pattern``, in one line; None if it is
    fine."""
    try:
        pl.select(pl.lit("", dtype=pl.String).str.contains(pattern))
    except pl.exceptions.PolarsError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines()]
        why = next((ln[len("error:"):].strip() for ln in lines if ln.startswith("error:")),
                   lines[0] if lines else type(exc).__name__)
        if "look-around" in why or "backreference" in why:
            why += (" (tracelens runs rules with Rust regex, which has neither: rewrite the "
                    "pattern, or exclude names with not_name / not_op / not_hlo)")
        return why
    return None

