"""What a job is read with, and every check of the arguments: the facade
(:mod:`tracelens.api.analysis`) owns them, so ``TraceAnalysis(p).window(step=999)`` and
``tracelens report p --step 999`` fail with the same one-line message. A problem with the
input is a :class:`~tracelens.core.errors.TraceInputError` (``<path>: <problem>``), a bad argument
a :class:`~tracelens.core.errors.TraceUsageError`; the CLI prints either and exits 2. No click,
no rich here: a notebook gets the error itself."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from tracelens.core.errors import TraceInputError, TraceUsageError

if TYPE_CHECKING:
    from tracelens.classify import RuleSet
    from tracelens.engine.hosts import EngineOptions, LoadOptions
    from tracelens.loading.filters import Filters
    from tracelens.results.filters import ActiveFilters

Window = tuple[int | None, int | None]


def joined(paths: Sequence[str | Path]) -> Path:
    """The inputs named as one path, as an error about the whole job names them."""
    return Path(", ".join(str(p) for p in paths))


def check_regex(value: str | None, option: str) -> str | None:
    """``value`` when it compiles as a regular expression (None passes)."""
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise TraceUsageError(f"not a regular expression: {exc}", option) from None
    return value


def time_window(value: str | Window | None) -> Window | None:
    """``--time START:END`` parsed (:func:`tracelens.loading.filters.parse_window`); a tuple of ns
    passes as it is."""
    if value is None or isinstance(value, tuple):
        return value
    from tracelens.loading.filters import parse_window
    try:
        return parse_window(value)
    except ValueError as exc:
        raise TraceUsageError(str(exc), "--time") from None


def mesh_axes(value: str | tuple[tuple[str, int], ...] | None) -> tuple[tuple[str, int], ...]:
    """``--mesh dp=8,tp=8`` parsed (:func:`tracelens.analyze.communication.mesh.parse_mesh`)."""
    if not value:
        return ()
    if not isinstance(value, str):
        return tuple(value)
    from tracelens.analyze.communication.mesh import parse_mesh
    try:
        return parse_mesh(value)
    except ValueError as exc:
        raise TraceUsageError(str(exc), "--mesh") from None


def load_rule_files(rules: Any) -> RuleSet | None:
    """A :class:`~tracelens.classify.RuleSet` as it is; rule files (TOML paths) loaded."""
    if rules is None or (isinstance(rules, (tuple, list)) and not rules):
        return None
    from tracelens.classify import RuleSet, load_rules
    if isinstance(rules, RuleSet):
        return rules
    return load_rules([str(r) for r in ([rules] if isinstance(rules, (str, Path))
                                        else rules)])


def load_gpu_specs(gpu: str | None, gpu_specs: str | Path | None) -> Any:
    """The specs file's entries (None without one); bad files and an unknown ``gpu`` fail
    before any trace is read."""
    from tracelens.core import hardware

    extra = None
    if gpu_specs is not None:
        try:
            extra = hardware.load_specs_file(gpu_specs)
        except OSError as exc:
            raise TraceInputError(gpu_specs, f"cannot read: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise TraceInputError(gpu_specs, f"bad GPU specs file: {exc}") from None
    table = {**hardware.SPECS, **(extra or {})}
    if gpu is not None:
        try:
            known = hardware.find_spec(gpu, table)
        except ValueError as exc:
            raise TraceUsageError(f"--gpu {gpu}: {exc}") from None
        if known is None:
            raise TraceUsageError(f"--gpu {gpu}: unknown GPU (known: {', '.join(table)})")
    return extra


def check_output_path(path: Path, paths: Sequence[str | Path], flag: str) -> None:
    """Fail before reading the inputs when ``path`` cannot be an output file: only a
    regular file is replaced (:func:`tracelens.api.outputs.check_target`)."""
    from tracelens.api.outputs import check_outputs

    check_outputs([(Path(path), flag)], paths)


def check_known(paths: Sequence[str | Path], device: int | None, step: int | None,
                steps: list[int], steps_source: str, devices: list[int]) -> None:
    """``device``/``step`` must name a device or step of the job: else the one-line input
    error naming what the job holds."""
    where = joined(paths)
    if step is not None and step not in steps:
        known = sorted(set(steps))
        raise TraceInputError(where, f"step {step} is not in the trace (steps: "
                              f"{known[:20] if known else 'none'}, from {steps_source})")
    if device is not None and device not in devices:
        raise TraceInputError(where, f"device {device} is not in the trace (devices: "
                              f"{sorted(set(devices))})")


def check_device_and_step(trace: Any, paths: Sequence[str | Path], device: int | None,
                          step: int | None) -> None:
    """:func:`check_known` of a loaded trace."""
    check_known(paths, device, step, trace.steps["step"].to_list(), trace.meta.steps_source,
                trace.devices["device"].to_list())


@dataclass(frozen=True)
class JobInputs:
    """What every analysis reads and where: the paths, the loader's options (``rules``: a
    RuleSet or rule files), the filters (per row: ``categories``, ``kernel``; job-wide:
    ``hosts``, ``time``) and the engine's options; ``progress``: the loader's progress
    callback for a job loaded whole (the CLI's bar)."""

    paths: tuple[Path, ...]
    rules: Any = None
    step_marker: str | None = None
    categories: tuple[str, ...] = ()
    kernel: str | None = None
    hosts: tuple[str, ...] = ()
    time: Window | None = None
    workers: int | None = None
    scheduler: str | None = None
    progress: Callable[..., object] | None = field(default=None, compare=False)

    def checked(self) -> JobInputs:
        """The same inputs with every argument checked and parsed (rules loaded)."""
        from dataclasses import replace

        from tracelens.core.categories import CATEGORIES

        bad = [c for c in self.categories if c not in CATEGORIES]
        if bad:
            raise TraceUsageError(f"{bad[0]!r} is not one of {', '.join(CATEGORIES)}",
                                  "--category")
        if self.workers is not None and self.workers < 1:
            raise TraceUsageError(f"{self.workers} is not in the range x>=1", "--workers")
        return replace(self, paths=tuple(Path(p) for p in self.paths),
                       rules=load_rule_files(self.rules),
                       step_marker=check_regex(self.step_marker, "--step-marker"),
                       kernel=check_regex(self.kernel, "--kernel"),
                       categories=tuple(self.categories), hosts=tuple(self.hosts),
                       time=time_window(self.time))

    def load(self) -> LoadOptions:
        """The engine's :class:`~tracelens.engine.hosts.LoadOptions` (the job-wide filters make
        it load the job whole, with the progress callback)."""
        from tracelens.engine.hosts import LoadOptions

        return LoadOptions(self.rules, self.step_marker, self.hosts, self.time,
                           self.progress if self.job_wide else None)

    @property
    def job_wide(self) -> bool:
        return bool(self.hosts) or self.time is not None

    def engine(self) -> EngineOptions:
        from tracelens.engine.hosts import EngineOptions

        return EngineOptions(self.workers, self.scheduler)

    def rows(self) -> Filters:
        """The per-row filters."""
        from tracelens.loading.filters import Filters

        return Filters(categories=self.categories, kernel=self.kernel)

    def filters(self) -> Filters:
        from tracelens.loading.filters import Filters

        return Filters(hosts=self.hosts, categories=self.categories, kernel=self.kernel,
                       time=self.time)

    def active(self) -> ActiveFilters:
        """Every filter in force, for the outputs' ``filters`` record."""
        return self.filters().active()
