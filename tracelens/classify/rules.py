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
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import polars as pl

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from tracelens.core.errors import TraceInputError
from tracelens.core.model import CATEGORIES, KINDS

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


def _compile(path: str, where: str, pattern: Any) -> str:
    if not isinstance(pattern, str):
        raise TraceInputError(path, f"{where}: regex must be a string, got {pattern!r}")
    # The packaged rules' regexes are checked by the tests (test_classify), not at every start:
    # Rust compiles the 117 of them in ~35 ms, and classifying compiles them again anyway.
    problem = None if path == BUILTIN_PATH else _regex_problem(pattern)
    if problem is not None:
        raise TraceInputError(path, f"{where}: bad regex {pattern!r}: {problem}")
    return pattern


def _compile_map(path: str, where: str, table: Any) -> SubMap:
    if not isinstance(table, Mapping) or not table:
        raise TraceInputError(path, f"{where}: a subcategory map must be a non-empty table")
    out = []
    for pattern, value in table.items():
        if not isinstance(value, str):
            raise TraceInputError(path, f"{where}: map value for {pattern!r} must be a string")
        out.append((_compile(path, where, pattern), value))
    return tuple(out)


Vocab = Mapping[str, tuple[str, ...]]  # named word lists ([words] tables)


def _word_entries(path: str, where: str, value: Any, vocab: Vocab) -> tuple[str, ...]:
    """A word condition's entries: a list of words and phrases, or the name of a [words]
    list. An entry is lowercase words one space apart, as :func:`words_of` writes a name
    (letters and digits apart: ``fp 8``, not ``fp8``); ``*`` at a word's start or end stands for
    more letters (``*norm``: rmsnorm, layernorm, ...)."""
    if isinstance(value, str):
        if value not in vocab:
            raise TraceInputError(path, f"{where}: unknown word list {value!r} (give a list, "
                                  "or the name of a [words] list)")
        return vocab[value]
    if not isinstance(value, list) or not value:
        raise TraceInputError(path, f"{where}: must be a non-empty list of words")
    for entry in value:
        if not isinstance(entry, str) or not re.fullmatch(_WORD_ENTRY, entry):
            raise TraceInputError(
                path, f"{where}: bad word {entry!r} (lowercase letters or digits, one space "
                "between words, letters and digits apart as in 'fp 8', '*' only at a word's "
                "start or end)")
    return tuple(value)


def word_pattern(entries: Iterable[str]) -> str:
    """The Rust regex that finds any of ``entries`` as whole words of a :func:`words_of`
    text; the word found is its group 1."""
    alts = "|".join(" ".join("[a-z]*".join(tok.split("*")) for tok in entry.split(" "))
                    for entry in entries)
    return f"(?:^| )({alts})(?: |$)"


def _parse_rule(path: str, index: int, raw: Any, maps: Mapping[str, SubMap],
                vocab: Vocab | None = None) -> Rule:
    where = f"rule #{index + 1}"
    if not isinstance(raw, Mapping):
        raise TraceInputError(path, f"{where}: must be a table")
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not rule_id.strip():
        raise TraceInputError(path, f"{where}: missing id")
    where = f"rule {rule_id!r}"
    unknown = sorted(set(raw) - RULE_KEYS)
    if unknown:
        raise TraceInputError(path, f"{where}: unknown key(s) {', '.join(unknown)}")
    category = raw.get("category")
    if category not in CATEGORIES:
        expected = ", ".join(CATEGORIES)
        raise TraceInputError(
            path, f"{where}: unknown category {category!r} (expected one of {expected})")
    conditions = {k: raw[k] for k in CONDITION_KEYS if k in raw}
    if not any(k in raw for k in POSITIVE_KEYS):
        raise TraceInputError(path, f"{where}: no condition (give kind, name, op, hlo or "
                              "words)")
    kinds = None
    if "kind" in raw:
        kind_list = raw["kind"]
        if isinstance(kind_list, str):
            kind_list = [kind_list]
        if not (isinstance(kind_list, list) and kind_list and all(k in KINDS for k in kind_list)):
            raise TraceInputError(
                path, f"{where}: kind must list some of {', '.join(KINDS)}, got {raw['kind']!r}")
        kinds = frozenset(kind_list)
    name = _compile(path, f"{where} name", raw["name"]) if "name" in raw else None
    op = _compile(path, f"{where} op", raw["op"]) if "op" in raw else None
    hlo = _compile(path, f"{where} hlo", raw["hlo"]) if "hlo" in raw else None
    excludes = tuple((k, _compile(path, f"{where} not_{k}", raw[f"not_{k}"]))
                     for k in TEXT_KEYS if f"not_{k}" in raw)
    word_source = None
    patterns: list[str] = []
    if any(k in raw for k in (*WORD_KEYS, "words_in")):
        word_source = raw.get("words_in", "name")
        if word_source not in WORD_SOURCES:
            raise TraceInputError(path, f"{where}: words_in must be 'name' or 'op', got "
                                  f"{word_source!r}")
        if "words" not in raw:
            raise TraceInputError(path, f"{where}: and_words, not_words and words_in need "
                                  "words")
        lists = {k: word_pattern(_word_entries(path, f"{where} {k}", raw[k], vocab or {}))
                 for k in WORD_KEYS if k in raw}
        patterns = [lists[k] for k in ("words", "and_words") if k in lists]
        if "not_words" in lists:
            excludes += ((WORDS_COLUMN[word_source], lists["not_words"]),)

    subcategory = raw.get("subcategory")
    if subcategory is not None and not isinstance(subcategory, str):
        raise TraceInputError(path, f"{where}: subcategory must be a string")
    sources = raw.get("subcategory_from", ())
    if isinstance(sources, str):
        sources = [sources]
    if not isinstance(sources, (list, tuple)) or any(s not in SUBCATEGORY_SOURCES for s in sources):
        raise TraceInputError(path, f"{where}: subcategory_from must list 'op', 'name' "
                              "and/or 'hlo'")
    sub_map: SubMap = ()
    if "subcategory_map" in raw:
        ref = raw["subcategory_map"]
        if isinstance(ref, str):
            if ref not in maps:
                raise TraceInputError(path, f"{where}: unknown subcategory_map {ref!r}")
            sub_map = maps[ref]
        else:
            sub_map = _compile_map(path, f"{where} subcategory_map", ref)
    if bool(sources) != bool(sub_map):
        raise TraceInputError(path, f"{where}: subcategory_from and subcategory_map go together")

    description = raw.get("description") or f"user rule from {Path(path).name}"
    if not isinstance(description, str):
        raise TraceInputError(path, f"{where}: description must be a string")
    return Rule(
        id=rule_id, category=category, description=" ".join(description.split()),
        conditions=conditions, kinds=kinds, name=name, op=op, hlo=hlo, excludes=excludes,
        subcategory=subcategory,
        subcategory_from=tuple(sources), subcategory_map=sub_map, source=path,
        word_source=word_source, word_patterns=tuple(patterns),
        layer=_layer(rule_id, word_source, path))


def _layer(rule_id: str, word_source: str | None, path: str) -> str:
    """The layer a rule belongs to: a user file's rules are "user"; a built-in rule's layer is
    what it reads (the words of the name, of the launching op, else library names and ops)."""
    if path != BUILTIN_PATH:
        return USER_LAYER
    if rule_id == FALLBACK_ID:
        return "fallback"
    return {"name": "name words", "op": "launching op"}.get(word_source or "", "library")


def _check_layers(rules: list[Rule], path: str) -> None:
    """The built-in rules run layer after layer (:data:`LAYERS`), so that what ``explain``
    calls a layer is where the rule stands: no library rule after a word rule, and a word or
    op rule reads nothing but its own text (and the activity kind)."""
    for before, rule in zip(rules, rules[1:]):
        if LAYERS.index(rule.layer) < LAYERS.index(before.layer):
            raise TraceInputError(path, f"rule {rule.id!r} ({rule.layer}) comes after rule "
                                  f"{before.id!r} ({before.layer}): layers run in the order "
                                  f"{', '.join(LAYERS)}")
    for rule in rules:
        other_text = any(col not in WORDS_COLUMN.values() for col, _ in rule.excludes)
        if rule.layer in ("name words", "launching op") and (
                rule.name or rule.op or rule.hlo or other_text):
            raise TraceInputError(path, f"rule {rule.id!r} ({rule.layer}): a word rule reads "
                                  "only words (and kind)")


def parse_rules(data: Mapping[str, Any], path: str, shared_maps: Mapping[str, SubMap] | None = None,
                shared_words: Vocab | None = None
                ) -> tuple[list[Rule], dict[str, SubMap], dict[str, tuple[str, ...]]]:
    """Validate one parsed TOML document; returns its rules, its named maps and its named
    word lists."""
    unknown = sorted(set(data) - {"rule", "maps", "words"})
    if unknown:
        raise TraceInputError(path, f"unknown top-level key(s) {', '.join(unknown)}")
    raw_maps = data.get("maps", {})
    if not isinstance(raw_maps, Mapping):
        raise TraceInputError(path, "[maps] must be a table of tables")
    own_maps = {name: _compile_map(path, f"map {name!r}", table)
                for name, table in raw_maps.items()}
    maps = {**(shared_maps or {}), **own_maps}  # a file's own maps shadow the built-in ones
    raw_words = data.get("words", {})
    if not isinstance(raw_words, Mapping):
        raise TraceInputError(path, "[words] must be a table of word lists")
    own_words = {name: _word_entries(path, f"word list {name!r}", entries, {})
                 for name, entries in raw_words.items()}
    vocab = {**(shared_words or {}), **own_words}
    raw_rules = data.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise TraceInputError(path, "no [[rule]] entries")
    rules = [_parse_rule(path, i, raw, maps, vocab) for i, raw in enumerate(raw_rules)]
    if path == BUILTIN_PATH:
        _check_layers(rules, path)
    return rules, own_maps, own_words


def _read_toml(path: str, text: bytes | None = None) -> dict[str, Any]:
    try:
        if text is None:
            text = Path(path).read_bytes()
        return tomllib.loads(text.decode("utf-8"))
    except OSError as exc:
        raise TraceInputError(path, f"cannot read rules file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TraceInputError(path, "rules file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise TraceInputError(path, f"invalid TOML: {exc}") from None


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[tuple[Rule, ...], dict[str, SubMap], dict[str, tuple[str, ...]]]:
    """Parse the packaged rules.toml once per process."""
    ref = resources.files("tracelens.classify").joinpath(BUILTIN_NAME)
    rules, maps, words = parse_rules(_read_toml(BUILTIN_PATH, ref.read_bytes()), BUILTIN_PATH)
    _check_unique(rules, BUILTIN_PATH, {})
    return tuple(rules), maps, words


def _check_unique(rules: Iterable[Rule], path: str, seen: dict[str, str]) -> None:
    for rule in rules:
        if rule.id in seen:
            raise TraceInputError(
                rule.source or path, f"duplicate rule id {rule.id!r} (also in {seen[rule.id]})")
        seen[rule.id] = rule.source or path


@functools.lru_cache(maxsize=1)
def _builtin_ruleset() -> RuleSet:
    rules, _, _ = _builtin()
    return RuleSet(rules, (rules[0].source,))


def load_rules(extra_files: Iterable[str | Path] | None = None) -> RuleSet:
    """The built-in rules, preceded by the rules of each user file (earlier files first).

    Any problem in a file raises :class:`TraceInputError` naming that file.
    """
    extra = [str(p) for p in (extra_files or [])]
    if not extra:
        return _builtin_ruleset()
    builtin_rules, builtin_maps, builtin_words = _builtin()
    seen = {rule.id: rule.source for rule in builtin_rules}  # user ids may not reuse built-in ids
    user_rules: list[Rule] = []
    for path in extra:
        rules, _, _ = parse_rules(_read_toml(path), path, builtin_maps, builtin_words)
        _check_unique(rules, path, seen)
        user_rules.extend(rules)
    return RuleSet(tuple(user_rules) + builtin_rules, tuple(extra) + (builtin_rules[0].source,))
