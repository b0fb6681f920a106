"""The filters in force, as every output records them (JSON ``filters``): typed records
whose JSON is :func:`tracelens.results.encode.encode` of them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from tracelens.results.encode import flattened, optional

FilterValue = tuple[str, ...] | str | int | tuple[int | None, int | None] | None


@dataclass(frozen=True, slots=True)
class ActiveFilters:
    """What ``--host``, ``--category``, ``--kernel`` and ``--time`` kept; the JSON holds only
    those given. False when none is."""

    host: tuple[str, ...] = field(default=(), metadata=optional())
    category: tuple[str, ...] = field(default=(), metadata=optional())
    kernel: str | None = field(default=None, metadata=optional())  # a regex over names
    # ns from the trace's zero, either side open
    time_ns: tuple[int | None, int | None] | None = field(default=None, metadata=optional())

    def __bool__(self) -> bool:
        return bool(self.host or self.category or self.kernel is not None
                    or self.time_ns is not None)

    def merged(self, other: ActiveFilters) -> ActiveFilters:
        """These filters with those ``other`` gives replacing them."""
        return ActiveFilters(
            other.host or self.host, other.category or self.category,
            self.kernel if other.kernel is None else other.kernel,
            self.time_ns if other.time_ns is None else other.time_ns)

    def items(self) -> list[tuple[str, FilterValue]]:
        """(JSON name, value) of the filters given, in JSON order."""
        return [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                if getattr(self, f.name) not in ((), None)]


@dataclass(frozen=True, slots=True)
class SummaryFilters:
    """``summarize``'s filters: ``--device`` and ``--step`` (null when not given), then the
    row and job filters."""

    device: int | None = None
    step: int | None = None
    rows: ActiveFilters = field(default_factory=ActiveFilters, metadata=flattened())

    def merged(self, extra: ActiveFilters) -> SummaryFilters:
        return dataclasses.replace(self, rows=self.rows.merged(extra))

    def items(self) -> list[tuple[str, FilterValue]]:
        return [("device", self.device), ("step", self.step), *self.rows.items()]
