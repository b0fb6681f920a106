"""The ``tracelens history`` results: what a run store holds per run and what
``history check`` finds. JSON comes from :mod:`tracelens.results.encode`.

A run's numbers are those of the existing analyses, never recomputed: the median-step
components of ``compare`` (:class:`tracelens.analyze.runs.scaling.RunProfile`, they add up to
``step_ns`` exactly), ``summarize``'s category totals and MFU, and the ``collectives``
exposed time per type. Times are ns; components are per median step, averaged over devices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results import display
from tracelens.results.encode import rounded


@dataclass(frozen=True)
class RecordedInput:
    """One input file of a run: its path as given, content hash and size."""

    path: str
    sha256: str
    bytes: int


@dataclass(frozen=True)
class CategoryRecord:
    """``summarize``'s category totals (summed over the devices, whole trace)."""

    category: str
    count: int
    sum_ns: int
    exclusive_ns: int


@dataclass(frozen=True)
class KernelRecord:
    """One kernel group of ``compare`` (category, program, op, normalized name): time and
    count per device-step."""

    category: str | None
    program: str | None
    op: str | None
    key: str
    name: str
    ns_per_step: float = field(metadata=rounded(3))
    count_per_step: float = field(metadata=rounded(3))


@dataclass(frozen=True)
class CommRecord:
    """``collectives``' totals of one type (whole trace, summed over devices)."""

    type: str
    count: int
    sum_ns: int
    exposed_ns: int


@dataclass(frozen=True)
class FindingRecord:
    """One of ``summarize``'s findings (what to fix first) as recorded: its kind and target
    (what names it from run to run), its title and its projected saving per step (null:
    no projection)."""

    kind: str
    target: str
    title: str
    saved_ns: int | None

    @property
    def key(self) -> str:
        return f"{self.kind} {self.target}"


@dataclass(frozen=True)
class RunRecord:
    """One recorded run: identity, tags, hardware and the numbers (a few KB, no events).

    ``inputs_hash`` identifies the run: the inputs' contents, the step marker and the rule
    files' contents (the same inputs recorded twice are one run). ``series``: the key of the
    runs it is compared with (its tags, hardware and device count)."""

    label: str
    recorded_at: str  # ISO 8601 UTC, microseconds
    tags: dict[str, str]
    series: str
    hardware: str
    devices: int
    hosts: int
    steps: int
    steps_source: str
    step_ns: float = field(metadata=rounded(3))
    components: dict[str, float] = field(metadata=rounded(3))
    mfu: float | None = field(metadata=rounded(6))
    tool_version: str = ""
    inputs_hash: str = ""
    inputs: tuple[RecordedInput, ...] = ()
    categories: tuple[CategoryRecord, ...] = ()
    kernels: tuple[KernelRecord, ...] = ()
    comm: tuple[CommRecord, ...] = ()
    # summarize's findings; None for a run recorded before the store kept them
    findings: tuple[FindingRecord, ...] | None = None

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict


@dataclass(frozen=True)
class RunPoint:
    """A run as ``history show``/``check`` list it (no kernel, input or category rows)."""

    label: str
    recorded_at: str
    tags: dict[str, str]
    series: str
    hardware: str
    devices: int
    step_ns: float = field(metadata=rounded(3))
    mfu: float | None = field(metadata=rounded(6))
    components: dict[str, float] = field(metadata=rounded(3))
    regression: bool = False  # flagged when it was the newest run of its series

    @staticmethod
    def of(r: RunRecord, regression: bool = False) -> "RunPoint":
        return RunPoint(r.label, r.recorded_at, r.tags, r.series, r.hardware, r.devices,
                        r.step_ns, r.mfu, r.components, regression)


@dataclass(frozen=True)
class MovedComponent:
    """A component that grew from the baseline run to the newest beyond its own spread."""

    component: str
    delta_ns: float = field(metadata=rounded(3))


@dataclass(frozen=True)
class Regression:
    """The newest run of a series, slower than its baseline beyond the series' spread and
    the ``--fail-above`` limit. ``first_label``: the first run of the shift (change point);
    ``baseline_label``: the run compared against (the median run before the shift, or
    ``--baseline``); ``threshold_ns``: the change a regression had to exceed."""

    label: str
    series: str
    step_ns: float = field(metadata=rounded(3))
    baseline_step_ns: float = field(metadata=rounded(3))
    change_pct: float = field(metadata=rounded(3))
    first_label: str = ""
    causes: tuple[MovedComponent, ...] = ()
    baseline_label: str = ""
    spread_ns: float | None = field(default=None, metadata=rounded(3))
    threshold_ns: float = field(default=0.0, metadata=rounded(3))


@dataclass(frozen=True)
class SeriesCheck:
    """One series and what the check could say about its newest run: ``status`` is
    ``regressed``, ``ok`` or ``not checked`` (``reason`` says why: too few runs, the
    baseline is in another series)."""

    series: str
    runs: int
    newest: str
    status: str
    reason: str | None = None
    baseline_label: str | None = None
    change_pct: float | None = field(default=None, metadata=rounded(3))
    threshold_ns: float | None = field(default=None, metadata=rounded(3))
    # the newest run's findings (summarize's what to fix first) its baseline did not have,
    # and the baseline's it no longer has, by title; None when a run of the two was
    # recorded before the store kept findings
    findings_appeared: tuple[str, ...] | None = None
    findings_vanished: tuple[str, ...] | None = None


@dataclass(frozen=True)
class HistoryCheck:
    """``history check``: the runs (in the order recorded), the regressions found and each
    series' verdict; ``notes`` say what was not compared (series that share tags but not
    hardware or device count)."""

    runs: tuple[RunPoint, ...]
    regressions: tuple[Regression, ...]
    series: tuple[SeriesCheck, ...]
    window: int
    fail_above_pct: float
    baseline: str | None
    notes: tuple[str, ...] = ()

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict


@dataclass(frozen=True)
class HistoryShow:
    """``history show``: the runs (filtered by tags) with the metric shown, regressions
    marked as :class:`HistoryCheck` finds them run by run."""

    metric: str
    runs: tuple[RunPoint, ...]
    regressions: tuple[Regression, ...]
    notes: tuple[str, ...] = ()

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict
