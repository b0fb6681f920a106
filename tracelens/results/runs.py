"""The ``tracelens compare`` and ``tracelens scaling`` results (docs/compare.md#definitions). Times
are ns
per step (medians and averages over devices: floats); ``None`` where a ratio has no
denominator or a run lacks the value. The JSON is :func:`tracelens.results.encode.encode`
of them (values as computed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results import display
from tracelens.results.encode import flattened, optional, renamed
from tracelens.results.filters import ActiveFilters
from tracelens.results.findings import FindingsChange
from tracelens.results.memory import MemoryChange
from tracelens.results.summary import HardwareCount


@dataclass(frozen=True)
class Cause:
    """One component's change from run a to run b and its share of the gross change (the sum
    of every component's absolute change: components move both ways, so a share is at most
    1; the delta's sign says which way it moved)."""

    component: str
    delta_ns: float
    share: float | None
    # the costliest `tracelens hlo` finding about its type
    hlo_finding: str | None = field(default=None, metadata=optional())


@dataclass(frozen=True)
class TypeStraggler:
    """One device and collective type of the later run: how often it arrived last and the
    waiting it caused, in total and per device-step."""

    host: str
    rank: int
    device: int
    type: str
    instances: int
    times_last: int
    wait_ns: int
    wait_per_step_ns: float


@dataclass(frozen=True)
class Noise:
    """Whether a step-time change stands out of the runs' own step-to-step spread
    (docs/compare.md#definitions): ``floor_ns`` = 2·√(se_a² + se_b²), each run's standard error of
    its median step
    ``se`` = 1.2533 · 1.4826 · MAD(step times) / √steps; ``within`` = |change| ≤ floor.
    Unknown (None, with ``reason``) where a run has fewer than two steps."""

    floor_ns: float | None
    within: bool | None
    se_ns: tuple[float | None, float | None]  # (run a, run b); a's scaled as its step is
    reason: str | None = None


@dataclass(frozen=True)
class Transition:
    """From run a to run b: efficiency, the lost time split into causes, and the verdict
    (sentences read off the causes)."""

    from_path: str = field(metadata=renamed("from"))
    to_path: str = field(metadata=renamed("to"))
    devices: tuple[int, int]
    efficiency: float | None
    mode: str  # "weak" or "strong"
    step_ns: tuple[float, float]
    delta_ns: float
    gross_ns: float  # the sum of the causes' absolute deltas
    noise: Noise
    causes: tuple[Cause, ...]
    busbw: dict[str, tuple[float | None, float | None]]  # type -> (a, b), sorted by type
    arrival_skew_ns: dict[str, tuple[float | None, float | None]]
    stragglers: tuple[TypeStraggler, ...]
    warnings: tuple[str, ...]
    verdict: tuple[str, ...]


@dataclass(frozen=True)
class ScalingRun:
    path: str
    devices: int
    hosts: int
    steps: int
    steps_source: str
    step_ns: float
    components: dict[str, float]  # component order (compute, straggler_wait, comm, ...)
    median_se_ns: float | None  # its median step's standard error (:class:`Noise`)


@dataclass(frozen=True)
class Scaling:
    runs: tuple[ScalingRun, ...]
    transitions: tuple[Transition, ...]
    # the CLI's active filters, when any
    filters: ActiveFilters | None = field(default=None, metadata=optional())

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict


@dataclass(frozen=True)
class ComparedRun:
    path: str
    devices: int
    # as summarize's headline counts it
    hardware: tuple[HardwareCount, ...] = field(default=(), kw_only=True)
    steps: int
    step_ns: float
    median_se_ns: float | None  # its median step's standard error (:class:`Noise`)
    steps_source: str | None = field(default=None, metadata=optional())  # set by the CLI


@dataclass(frozen=True)
class ComponentChange:
    component: str
    base_ns: float
    new_ns: float
    delta_ns: float
    share: float | None  # |delta| over the gross change (:class:`Cause`)


@dataclass(frozen=True)
class KernelChange:
    """A matched kernel (or group of kernels of one op or name) whose time or count changed."""

    name: str
    base_name: str
    category: str | None
    match: str  # "op", "jax_op" (another compilation of the same JAX op) or "name"
    op: str | None
    base_op: str | None
    program: str | None
    base_program: str | None
    base_ns: float
    new_ns: float
    delta_ns: float
    base_count: float
    new_count: float
    base_kernels: int
    new_kernels: int
    jax_op: str | None = None  # the JAX op both sides ran it for (HLO metadata), when known


@dataclass(frozen=True)
class KernelOnly:
    """Kernels of one normalized name found in one run only."""

    name: str
    category: str | None
    op: str | None
    program: str | None
    ns_per_step: float
    count_per_step: float
    kernels: int


@dataclass(frozen=True)
class Matching:
    by_op: int
    by_jax_op: int
    by_name: int
    changed: int
    only_base: int
    only_new: int


@dataclass(frozen=True)
class Gate:
    """``compare --fail-above``: the limit and whether the step time grew beyond it."""

    fail_above_pct: float | None
    regression: bool


@dataclass(frozen=True)
class Comparison:
    base: ComparedRun
    new: ComparedRun
    # the hardware mismatches, then each side's warnings ("base: ...", "new: ...")
    warnings: tuple[str, ...] = field(default=(), kw_only=True)
    delta_ns: float
    delta_pct: float | None
    gross_ns: float  # the sum of the components' absolute deltas
    noise: Noise
    components: tuple[ComponentChange, ...]
    busbw: dict[str, tuple[float | None, float | None]]
    arrival_skew_ns: dict[str, tuple[float | None, float | None]]
    kernels: tuple[KernelChange, ...]  # the ``top`` largest changes
    only_base: tuple[KernelOnly, ...]
    only_new: tuple[KernelOnly, ...]
    matching: Matching
    verdict: tuple[str, ...]
    # the CLI's active filters, when any
    filters: ActiveFilters | None = field(default=None, metadata=optional())
    # set by the CLI: written as its two keys
    gate: Gate | None = field(default=None, metadata=optional() | flattened())
    # the findings (``summarize``'s "what to fix first") that appeared in new or vanished
    # from base, by kind and target; None when not computed (a comparison of profiles alone)
    findings: FindingsChange | None = field(default=None, kw_only=True)
    # each allocator's peak memory in base and new, where both runs record allocator events
    memory: tuple[MemoryChange, ...] = field(default=(), kw_only=True, metadata=optional())

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict
