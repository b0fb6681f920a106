"""Loading, validating and matching classification rules (the format is documented in rules.toml).

Rules are data so that users can extend them (``--rules``) and so that every decision carries
the id and one-sentence reason of the rule that made it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from tracelens.errors import TraceInputError
from tracelens.model import CATEGORIES, KINDS

BUILTIN_NAME = "rules.toml"
FALLBACK_ID = "other.fallback"
CONDITION_KEYS = ("kind", "name", "op", "hlo")
RULE_KEYS = frozenset(
    {"id", "category", "description", "subcategory", "subcategory_from", "subcategory_map",
     *CONDITION_KEYS})
SUBCATEGORY_SOURCES = ("op", "name", "hlo")

SubMap = tuple[tuple[re.Pattern[str], str], ...]


@dataclass(frozen=True)
class Match:
    """Why one (kind, name, op) got its category: the answer of :func:`explain`."""

    category: str
    subcategory: str | None
    rule_id: str
    description: str
    conditions: dict[str, Any]


@dataclass(frozen=True, eq=False)  # identity equality/hash: usable as a cache key
class Rule:
    """One compiled rule. ``conditions`` keeps the match conditions exactly as written."""

    id: str
    category: str
    description: str
    conditions: dict[str, Any]
    kinds: frozenset[str] | None = None
    name: re.Pattern[str] | None = None
    op: re.Pattern[str] | None = None
    hlo: re.Pattern[str] | None = None
    subcategory: str | None = None
    subcategory_from: tuple[str, ...] = ()
    subcategory_map: SubMap = ()
    source: str = ""

    def matches(self, kind: str | None, name: str | None, op: str | None,
                hlo: str | None = None) -> bool:
        """All conditions hold (AND); a missing value never satisfies a condition on it."""
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.name is not None and (name is None or self.name.search(name) is None):
            return False
        if self.op is not None and (op is None or self.op.search(op) is None):
            return False
        if self.hlo is not None and (hlo is None or self.hlo.search(hlo) is None):
            return False
        return True

    def subcategory_for(self, name: str | None, op: str | None,
                        hlo: str | None = None) -> str | None:
        """The first map hit over the ``subcategory_from`` texts, else the literal value."""
        texts = {"op": op, "name": name, "hlo": hlo}
        for source in self.subcategory_from:
            text = texts[source]
            if text is None:
                continue
            for pattern, value in self.subcategory_map:
                if pattern.search(text):
                    return value
        return self.subcategory


@dataclass(frozen=True, eq=False)
class RuleSet:
    """An ordered list of rules; the first rule that matches decides."""

    rules: tuple[Rule, ...]
    sources: tuple[str, ...] = ()
    _fallback: Rule = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fallback = next((r for r in self.rules if r.id == FALLBACK_ID), None)
        if fallback is None:  # a hand-built set still labels every event
            fallback = Rule(FALLBACK_ID, "other", "No rule recognised this kernel.", {})
        object.__setattr__(self, "_fallback", fallback)

    def match(self, kind: str | None, name: str | None, op: str | None,
              hlo: str | None = None) -> Rule:
        """The rule deciding this combination (classify calls it once per distinct combination)."""
        for rule in self.rules:
            if rule.matches(kind, name, op, hlo):
                return rule
        return self._fallback

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __getitem__(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)


def _compile(path: str, where: str, pattern: Any) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise TraceInputError(path, f"{where}: regex must be a string, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise TraceInputError(path, f"{where}: bad regex {pattern!r}: {exc}") from None


def _compile_map(path: str, where: str, table: Any) -> SubMap:
    if not isinstance(table, Mapping) or not table:
        raise TraceInputError(path, f"{where}: a subcategory map must be a non-empty table")
    out = []
    for pattern, value in table.items():
        if not isinstance(value, str):
            raise TraceInputError(path, f"{where}: map value for {pattern!r} must be a string")
        out.append((_compile(path, where, pattern), value))
    return tuple(out)


def _parse_rule(path: str, index: int, raw: Any, maps: Mapping[str, SubMap]) -> Rule:
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
    if not conditions:
        raise TraceInputError(path, f"{where}: no condition (give kind, name, op or hlo)")
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
        conditions=conditions, kinds=kinds, name=name, op=op, hlo=hlo, subcategory=subcategory,
        subcategory_from=tuple(sources), subcategory_map=sub_map, source=path)


def parse_rules(data: Mapping[str, Any], path: str, shared_maps: Mapping[str, SubMap] | None = None
                ) -> tuple[list[Rule], dict[str, SubMap]]:
    """Validate one parsed TOML document; returns its rules and its named maps."""
    unknown = sorted(set(data) - {"rule", "maps"})
    if unknown:
        raise TraceInputError(path, f"unknown top-level key(s) {', '.join(unknown)}")
    raw_maps = data.get("maps", {})
    if not isinstance(raw_maps, Mapping):
        raise TraceInputError(path, "[maps] must be a table of tables")
    own_maps = {name: _compile_map(path, f"map {name!r}", table)
                for name, table in raw_maps.items()}
    maps = {**(shared_maps or {}), **own_maps}  # a file's own maps shadow the built-in ones
    raw_rules = data.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise TraceInputError(path, "no [[rule]] entries")
    rules = [_parse_rule(path, i, raw, maps) for i, raw in enumerate(raw_rules)]
    return rules, own_maps


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
def _builtin() -> tuple[tuple[Rule, ...], dict[str, SubMap]]:
    """Parse the packaged rules.toml once per process."""
    ref = resources.files("tracelens.classify").joinpath(BUILTIN_NAME)
    path = f"<builtin {BUILTIN_NAME}>"
    rules, maps = parse_rules(_read_toml(path, ref.read_bytes()), path)
    _check_unique(rules, path, {})
    return tuple(rules), maps


def _check_unique(rules: Iterable[Rule], path: str, seen: dict[str, str]) -> None:
    for rule in rules:
        if rule.id in seen:
            raise TraceInputError(
                rule.source or path, f"duplicate rule id {rule.id!r} (also in {seen[rule.id]})")
        seen[rule.id] = rule.source or path


@functools.lru_cache(maxsize=1)
def _builtin_ruleset() -> RuleSet:
    rules, _ = _builtin()
    return RuleSet(rules, (rules[0].source,))


def load_rules(extra_files: Iterable[str | Path] | None = None) -> RuleSet:
    """The built-in rules, preceded by the rules of each user file (earlier files first).

    Any problem in a file raises :class:`TraceInputError` naming that file.
    """
    extra = [str(p) for p in (extra_files or [])]
    if not extra:
        return _builtin_ruleset()
    builtin_rules, builtin_maps = _builtin()
    seen = {rule.id: rule.source for rule in builtin_rules}  # user ids may not reuse built-in ids
    user_rules: list[Rule] = []
    for path in extra:
        rules, _ = parse_rules(_read_toml(path), path, builtin_maps)
        _check_unique(rules, path, seen)
        user_rules.extend(rules)
    return RuleSet(tuple(user_rules) + builtin_rules, tuple(extra) + (builtin_rules[0].source,))
