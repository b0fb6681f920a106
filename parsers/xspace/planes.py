"""One plane's metadata, resolved once: event names, interned strings (``ref_value``), the
stat ids we read, and event-metadata stats (defaults for every event of that metadata)."""

from __future__ import annotations

from typing import Any, Iterable

from parsers.xspace.columns import EVENT_STATS


def stat_value(stat: Any, ref_names: dict[int, str]) -> Any:
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return ref_names.get(stat.ref_value)
    if kind is None:
        return None
    return getattr(stat, kind)


class PlaneReader:
    """Resolves one plane's metadata once, for both line sources."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self.ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
        wanted = {name: i for i, name in enumerate(EVENT_STATS)}
        self.stat_code = {k: wanted[n] for k, n in self.ref_names.items() if n in wanted}
        self.event_names: dict[int, str] = {}
        self.keep: set[int] = set()  # event metadata ids kept whatever their stats (markers)
        self.defaults: dict[int, list[Any]] = {}
        # per stat code, the metadata ids with a default and the value (most codes: none)
        self.by_code: list[dict[int, Any]] = [{} for _ in EVENT_STATS]
        names, defaults, by_code = self.event_names, self.defaults, self.by_code
        code_of, refs, n_stats = self.stat_code, self.ref_names, len(EVENT_STATS)
        for k, md in plane.event_metadata.items():  # one pass: a file can define 100k+
            names[k] = md.name
            stats = md.stats
            if not stats:
                continue
            vals: list[Any] | None = None
            touched = []
            for st in stats:  # read_stats, inlined: the last value of a stat wins
                code = code_of.get(st.metadata_id)
                if code is not None:
                    if vals is None:
                        vals = [None] * n_stats
                    vals[code] = stat_value(st, refs)
                    touched.append(code)
            if vals is not None and any(v is not None for v in vals):
                defaults[k] = vals
                for code in touched:
                    if vals[code] is not None:
                        by_code[code][k] = vals[code]

    def wanted_ids(self) -> set[int]:
        """Event metadata ids whose events a ``wanted_only`` source keeps without a stat."""
        return set(self.defaults) | self.keep

    def read_stats(self, stats: Iterable[Any], base: list[Any] | None) -> list[Any]:
        """The wanted stats' values (``EVENT_STATS`` order) over ``base`` (the defaults)."""
        vals = list(base) if base is not None else [None] * len(EVENT_STATS)
        code_of = self.stat_code
        for st in stats:
            code = code_of.get(st.metadata_id)
            if code is not None:
                vals[code] = stat_value(st, self.ref_names)
        return vals

    def plane_stats(self) -> dict[str, Any]:
        """The plane's own stats by name (device capabilities, profile times, ...)."""
        return {self.ref_names.get(st.metadata_id, ""): stat_value(st, self.ref_names)
                for st in self.plane.stats}
