"""One plane's metadata, resolved once: event names, interned strings (``ref_value``), the
stat ids we read, and event-metadata stats (defaults for every event of that metadata)."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from parsers.xspace.columns import EVENT_STATS


def stat_value(stat: Any, ref_names: dict[int, str]) -> Any:
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return ref_names.get(stat.ref_value)
    if kind is None:
        return None
    return getattr(stat, kind)


# The event metadata the C decoder cut out of a plane's map (``native.FastLines.cut_metadata``):
# called with the plane's ``stat_code`` and ``ref_names``, it returns their ``event_names``
# and ``by_code`` as ``PlaneReader`` builds them from map entries.
CutMetadata = Callable[[dict[int, int], dict[int, str]],
                       tuple[dict[int, str], list[dict[int, Any]]]]


class PlaneReader:
    """Resolves one plane's metadata once, for both line sources.

    ``cut``: the event metadata entries the C decoder's ``scan`` cut out of the plane's map
    (whose keys the entries left in the map do not share), or None when the map is whole."""

    def __init__(self, plane: Any, cut: CutMetadata | None = None) -> None:
        self.plane = plane
        self.ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
        wanted = {name: i for i, name in enumerate(EVENT_STATS)}
        self.stat_code = {k: wanted[n] for k, n in self.ref_names.items() if n in wanted}
        self.keep: set[int] = set()  # event metadata ids kept whatever their stats (markers)
        self.xla_host = False  # a host plane whose XLA host work is read (xla_host.py)
        self._defaults: dict[int, list[Any]] | None = None
        # event names; per stat code, the metadata ids with a default and the value (most
        # codes: none)
        self.event_names: dict[int, str]
        self.by_code: list[dict[int, Any]]
        self.event_names, self.by_code = cut(self.stat_code, self.ref_names) \
            if cut is not None else ({}, [{} for _ in EVENT_STATS])
        names, by_code = self.event_names, self.by_code
        code_of, refs = self.stat_code, self.ref_names
        for k, md in plane.event_metadata.items():  # what scan left (all: per-event reader)
            names[k] = md.name
            stats = md.stats
            if not stats:
                continue
            vals: dict[int, Any] | None = None
            for st in stats:  # read_stats, inlined: the last value of a stat wins
                code = code_of.get(st.metadata_id)
                if code is not None:
                    if vals is None:
                        vals = {}
                    vals[code] = stat_value(st, refs)
            if vals is not None:
                for code, v in vals.items():
                    if v is not None:
                        by_code[code][k] = v

    @property
    def defaults(self) -> dict[int, list[Any]]:
        """Event-metadata stats: per metadata id with at least one wanted stat of a value,
        the values in ``EVENT_STATS`` order (None where it sets none); built on first use
        from ``by_code`` (only the per-event reader reads it)."""
        if self._defaults is None:
            by_code = self.by_code
            self._defaults = {k: [d.get(k) for d in by_code]
                              for k in set().union(*by_code)}
        return self._defaults

    def wanted_ids(self) -> set[int]:
        """Event metadata ids whose events a ``wanted_only`` source keeps without a stat."""
        return set().union(*self.by_code) | self.keep

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
