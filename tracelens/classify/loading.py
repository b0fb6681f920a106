"""Reading classification rules: the packaged rules.toml and a user's files, each rule checked
(keys, regexes, word lists, layers) with one error naming the file and the rule."""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
from tracelens.core.errors import TraceInputError
from tracelens.core.model import CATEGORIES, KINDS
from tracelens.classify.rules import (
    BUILTIN_NAME,
    BUILTIN_PATH,
    CONDITION_KEYS,
    FALLBACK_ID,
    LAYERS,
    POSITIVE_KEYS,
    RULE_KEYS,
    Rule,
    RuleSet,
    SUBCATEGORY_SOURCES,
    SubMap,
    TEXT_KEYS,
    USER_LAYER,
    WORDS_COLUMN,
    WORD_KEYS,
    WORD_SOURCES,
    _WORD_ENTRY,
    _regex_problem,
)


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
