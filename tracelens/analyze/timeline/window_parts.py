"""``report``'s step-timeline window on the engine, each host file read once in the common
case: the same window as :func:`tracelens.analyze.timeline.window.timeline_window` draws on the
whole job.

Round 1 (:class:`WindowChoice`) maps every host: its step windows and each device's busy
time per step (what the choice needs), and, speculatively, what the window would need of
the host if the job chose what the host's own data chooses under the same rule (its
:class:`Guess`). The reduce chooses the step, the window and the shown devices; a host that
owns a shown device and whose guess covers the choice sends nothing more. Only the owners
whose guess missed (hosts that disagree on the median step, or without steps a window that
reaches past what the host sent) are read again (:class:`WindowEvents`): never more hosts
than before, when every owner was read twice.

What a host sends of a step is reduced per device: the ``max_events`` longest activities
(the page's longest of the shown devices are among each device's longest), their count and
the exposed-communication intervals (computed from all of them). Each is per device, so
placing it in the job (ranks offset, host renamed, times shifted alike) changes no order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence, Union

import polars as pl

from tracelens.analyze.summary.packed import PackedFrame, pack_frame
from tracelens.analyze.timeline.breakdown import DEVICE_KEYS, clip_to_windows
from tracelens.analyze.timeline.window import (COLUMNS, TimelineWindow, device_busy, exposed_comm,
                                      finish_window, first_stretch, in_window, longest,
                                      shown_devices, steps_by_span, window_bounds)
from tracelens.loading.combine import place
from tracelens.loading.filters import Filters
from tracelens.core.model import Trace
from tracelens.engine.protocol import JobPlan

if TYPE_CHECKING:
    from tracelens.engine.hosts import EngineOptions, Job, LoadOptions


@dataclass(frozen=True)
class WindowOptions:
    """What picks the window: ``report``'s ``--device``/``--step``, its per-row filters
    (a :class:`tracelens.loading.filters.Filters` of categories and kernel names, or None) and the
    caps."""

    device: int | None = None
    step: int | None = None
    filters: Filters | None = None
    max_devices: int = 4
    max_events: int = 1500


Frame = Union[pl.DataFrame, PackedFrame]  # packed while it travels and waits (WindowChoice.pack)


def _frame(df: Frame) -> pl.DataFrame:
    return df.frame() if isinstance(df, PackedFrame) else df


@dataclass(frozen=True)
class StepPieces:
    """One host's activities in ``step``'s window on some of its devices, reduced per
    device (module doc): ``top`` (COLUMNS: each device's ``max_events`` longest, clipped to
    the window), ``counts`` (DEVICE_KEYS, ``n``: each device's activities in the window),
    ``exposed`` (DEVICE_KEYS, start_ns, end_ns: its exposed communication there)."""

    step: int
    top: Frame
    counts: pl.DataFrame
    exposed: Frame


@dataclass(frozen=True)
class Opening:
    """Without steps, the host's guess: its activities (COLUMNS) that start by the end of
    its own first ``max_events`` activities' stretch (the window if it were the job), and
    ``unsent`` (host, rank, start_ns = end_ns: the earliest start of the activities left
    out, per host and rank; empty: none left out). It covers the job's window when no
    activity left out starts before the window ends."""

    events: Frame
    unsent: pl.DataFrame


@dataclass(frozen=True)
class Busiest:
    """Without steps, one host's share of the window: every device's busy time in it
    (DEVICE_KEYS, ``_t``) and its own ``max_devices`` busiest devices' activities there
    (the job's shown devices are among them)."""

    busy: pl.DataFrame
    events: pl.DataFrame


Guess = Union[tuple[StepPieces, ...], Opening]
GUESSED_STEPS = 3
"""How many steps a host guesses without ``--step``: its median and the steps either side
of it in its order by span. Hosts whose spans differ by noise (as the straggler sample's
two do) may disagree on the median, usually by a neighbour; with at most 3 steps the job's
choice is always among them."""
Share = Union[StepPieces, Busiest]  # a host's share of the chosen window, in job time


@dataclass(frozen=True)
class WindowPart:
    """One host's round-1 part, in its own time and ranks: ``steps`` (host, rank, step,
    start_ns, end_ns), ``busy`` (DEVICE_KEYS, step, ``_t``), ``first`` (host, rank, start_ns,
    end_ns; only from a host without steps), ``empty`` (its activities' schema) and its
    ``guess`` (None: no activity)."""

    steps: pl.DataFrame
    busy: pl.DataFrame
    first: pl.DataFrame
    empty: pl.DataFrame
    guess: Guess | None = None


def window_activities(trace: Trace, opts: WindowOptions) -> pl.DataFrame:
    """The activities the window is drawn from: after the per-row filters and ``--device``,
    as ``report`` narrows the whole trace."""
    from tracelens.loading.filters import apply

    if opts.filters is not None and opts.filters.active():
        trace = apply(trace, opts.filters)
    ev = trace.events
    if opts.device is not None:
        ev = ev.filter(pl.col("device") == opts.device)
    return ev.select(COLUMNS)


def step_pieces(ev: pl.DataFrame, steps: Sequence[int], max_events: int
                ) -> tuple[StepPieces, ...]:
    """:class:`StepPieces` of each of ``steps`` from ``ev``: the activities (COLUMNS and
    ``step``) of the devices sent, clipped to each step's windows (one pass for them all)."""
    by = [*DEVICE_KEYS, "step"]
    per_device = ev.partition_by(by, maintain_order=True)
    top = pl.concat([longest(d, max_events) for d in per_device]) if per_device else ev
    counts, exposed = ev.group_by(by).agg(n=pl.len()), exposed_comm(ev, by)

    def of(df: pl.DataFrame, step: int) -> pl.DataFrame:
        return df.filter(pl.col("step") == step).drop("step")
    return tuple(StepPieces(s, of(top, s), of(counts, s), of(exposed, s)) for s in steps)


def window_part(trace: Trace, opts: WindowOptions) -> WindowPart:
    """The host's round-1 part (see :class:`WindowChoice`)."""
    ev = window_activities(trace, opts)
    hosts = trace.devices.select("rank", "host").unique()
    steps = trace.steps.select("rank", "step", "start_ns", "end_ns").join(
        hosts, on="rank", how="left").select("host", "rank", "step", "start_ns", "end_ns")
    clipped = clip_to_windows(ev, steps)
    busy = clipped.group_by(*DEVICE_KEYS, "step").agg(
        _t=(pl.col("end_ns") - pl.col("start_ns")).sum())
    first = first_stretch(ev.select("host", "rank", "start_ns", "end_ns"),
                          0 if steps.height else opts.max_events)
    guess = None
    if ev.height:
        guess = _step_guess(ev, steps, busy, opts) if steps.height else _opening(ev, first)
    return WindowPart(steps, busy, first, ev.head(0), guess)


def guessed_steps(steps: pl.DataFrame, step: int | None) -> list[int]:
    """The steps a host guesses (:data:`GUESSED_STEPS`): ``--step``, else its median step
    (:func:`tracelens.analyze.timeline.window.median_step`) and its neighbours by span."""
    if step is not None:
        return [step]
    order = steps_by_span(steps)
    mid = (len(order) - 1) // 2
    return order[max(0, mid - (GUESSED_STEPS - 1) // 2):][:GUESSED_STEPS]


def _step_guess(ev: pl.DataFrame, steps: pl.DataFrame, busy: pl.DataFrame,
                opts: WindowOptions) -> tuple[StepPieces, ...]:
    """Each guessed step's pieces on this host's ``max_devices`` busiest devices in it: a
    device of this host among the job's busiest in the step is among them."""
    guessed, clipped = guessed_steps(steps, opts.step), []
    for step in guessed:
        mine = shown_devices(busy.filter(pl.col("step") == step).drop("step"),
                             opts.max_devices)
        windows = steps.filter(pl.col("step") == step)
        near = ev.join(mine, on=DEVICE_KEYS, how="semi")  # none when the host lacks the step
        if windows.height:  # only what can overlap them, then clipped as in_window clips
            near = near.filter((pl.col("start_ns") < windows["end_ns"].max()) &
                               (pl.col("end_ns") > windows["start_ns"].min()))
        clipped.append(clip_to_windows(near, windows))
    return step_pieces(pl.concat(clipped), guessed, opts.max_events)


def _opening(ev: pl.DataFrame, first: pl.DataFrame) -> Opening:
    """The activities from the start to the end of the host's own first stretch."""
    until = first["end_ns"].max()
    sent = pl.col("start_ns") <= until
    unsent = ev.filter(~sent).group_by("host", "rank").agg(pl.col("start_ns").min()) \
        .with_columns(end_ns=pl.col("start_ns"))
    return Opening(ev.filter(sent), unsent)


class WindowChoice:
    """Round 1 on the Analysis protocol: each host's :class:`WindowPart`; the finish picks
    the step, the window and the shown devices exactly as
    :func:`tracelens.analyze.timeline.window.timeline_window` does on the whole job, keeps the
    owners' guesses that cover the choice and names the owners to read again."""

    def partial(self, trace: Trace, options: WindowOptions) -> WindowPart:
        return window_part(trace, options)

    def pack(self, part: WindowPart) -> WindowPart:
        """The guess's activities and exposed intervals packed
        (:func:`tracelens.analyze.summary.packed.pack_frame`): 0.16 MB for 3 steps of a synthetic
        48k-kernel, 8-GPU host (1.6 MB pickled as frames; its summary partial: 2.5 MB)."""
        g = part.guess
        if isinstance(g, tuple):
            g = tuple(replace(p, top=pack_frame(_frame(p.top)),
                              exposed=pack_frame(_frame(p.exposed))) for p in g)
        elif isinstance(g, Opening):
            g = replace(g, events=pack_frame(_frame(g.events)))
        return replace(part, guess=g)

    def merge(self, parts: Sequence[WindowPart], plan: JobPlan) -> Chosen | None:
        if not any(p.busy.height or p.first.height for p in parts):
            return None  # no activity on any host (after the filters)
        steps = plan.concat([p.steps for p in parts]).drop("host")
        return Chosen(plan, steps, plan.place(parts[0].empty, 0), list(parts))

    def finish(self, part: Chosen | None, options: WindowOptions) -> Chosen | None:
        if part is None:
            return None
        step, lo, hi = window_bounds(part.steps, options.step, lambda: first_stretch(
            part.plan.concat([p.first for p in part.parts]), options.max_events))
        steps = part.steps.filter(pl.col("step") == step) if step is not None else \
            part.steps.head(0)
        busy = shown = None
        if step is not None:
            busy = pl.concat([place(p.busy, w) for p, w in zip(part.parts, part.plan.placements)]
                             ).filter(pl.col("step") == step).drop("step")
            shown = shown_devices(busy, options.max_devices)
            owners = [i for i, (p, w) in enumerate(zip(part.parts, part.plan.placements))
                      if place(p.busy, w).join(shown, on=DEVICE_KEYS, how="semi").height]
            got = [_step_share(part, i, step, shown) for i in owners]
        else:
            owners = [i for i, p in enumerate(part.parts) if p.first.height]
            got = [_opening_share(part, i, lo, hi, options.max_devices) for i in owners]
        return replace(part, step=step, lo=lo, hi=hi, steps=steps, busy=busy, shown=shown,
                       owners=tuple(owners), parts=[],
                       have=tuple(g for g in got if g is not None),
                       missing=tuple(i for i, g in zip(owners, got) if g is None))


def _step_share(c: Chosen, i: int, step: int, shown: pl.DataFrame) -> StepPieces | None:
    """Owner ``i``'s pieces of the shown devices, in job time; None when its guess was
    another step or lacks one of its shown devices."""
    guess = c.parts[i].guess
    g = next((p for p in guess if p.step == step), None) if isinstance(guess, tuple) else None
    if g is None:
        return None
    counts = c.plan.place(g.counts, i).join(shown, on=DEVICE_KEYS, how="semi")
    mine = place(c.parts[i].busy, c.plan.placements[i]).filter(pl.col("step") == step) \
        .join(shown, on=DEVICE_KEYS, how="semi")
    if mine.join(counts, on=DEVICE_KEYS, how="anti").height:
        return None
    return StepPieces(step, c.plan.place(_frame(g.top), i).join(shown, on=DEVICE_KEYS,
                                                                  how="semi"),
                      counts, c.plan.place(_frame(g.exposed), i).join(shown, on=DEVICE_KEYS,
                                                                      how="semi"))


def _opening_share(c: Chosen, i: int, lo: int, hi: int, max_devices: int) -> Busiest | None:
    """Host ``i``'s share of the window without steps, in job time; None when an activity
    it left out may start before the window ends."""
    g = c.parts[i].guess
    if not isinstance(g, Opening):
        return None
    unsent = c.plan.place(g.unsent, i)
    if unsent.height and unsent["start_ns"].min() < hi:  # type: ignore[operator]
        return None
    return busiest(in_window(c.plan.place(_frame(g.events), i), c.steps, None, lo, hi),
                   max_devices)


def busiest(ev: pl.DataFrame, max_devices: int) -> Busiest:
    """A host's :class:`Busiest` from its activities in the window (job time)."""
    busy = device_busy(ev)
    return Busiest(busy, ev.join(shown_devices(busy, max_devices), on=DEVICE_KEYS))


@dataclass(frozen=True)
class Chosen:
    """Round 1's choice: the job's plan, the step windows (all, then the chosen step's), the
    empty activity frame in job time; after ``finish`` the step (None: no steps), the window
    ``lo``..``hi``, the devices' busy times and the shown devices (None without steps: known
    once every host's busy times are), the hosts owning them (``owners``), the shares of
    those whose guess covered the choice (``have``, job time) and the others (``missing``:
    read again in round 2)."""

    plan: JobPlan
    steps: pl.DataFrame
    empty: pl.DataFrame
    parts: list[WindowPart]
    step: int | None = None
    lo: int = 0
    hi: int = 0
    busy: pl.DataFrame | None = None
    shown: pl.DataFrame | None = None
    owners: tuple[int, ...] = ()
    have: tuple[Share, ...] = ()
    missing: tuple[int, ...] = ()


@dataclass(frozen=True)
class Round2:
    """What a round-2 host needs: its index in the job, the choice and the options."""

    index: int
    chosen: Chosen
    options: WindowOptions


class WindowEvents:
    """Round 2, only for the owners whose guess missed (:attr:`Chosen.missing`): each is
    read again and sends its share of the chosen window in job time; the finish draws the
    window from every owner's share (:func:`tracelens.analyze.timeline.window.finish_window`)."""

    def partial(self, trace: Trace, options: Round2) -> Share:
        c, opts = options.chosen, options.options
        ev = c.plan.place(window_activities(trace, opts), options.index)
        if c.shown is None:
            return busiest(in_window(ev, c.steps, c.step, c.lo, c.hi), opts.max_devices)
        assert c.step is not None
        ev = clip_to_windows(ev.join(c.shown, on=DEVICE_KEYS, how="semi"),  # in_window's clip
                             c.steps.filter(pl.col("step") == c.step))
        return step_pieces(ev, [c.step], opts.max_events)[0]

    def merge(self, parts: Sequence[Share], plan: JobPlan) -> list[Share]:
        return list(parts)

    def finish(self, part: list[Share], options: Round2) -> TimelineWindow:
        c, opts = options.chosen, options.options
        got = [*c.have, *part]
        if c.shown is None or c.busy is None:  # no steps: the shown devices from every host
            shares = [g for g in got if isinstance(g, Busiest)]
            busy = pl.concat([b.busy for b in shares])
            shown = shown_devices(busy, opts.max_devices)
            ev = pl.concat([c.empty, *(b.events for b in shares)]).join(shown, on=DEVICE_KEYS)
            return finish_window(ev, c.step, c.lo, c.hi, shown, busy.height, opts.max_events)
        pieces = [g for g in got if isinstance(g, StepPieces)]
        top = pl.concat([c.empty, *(_frame(p.top) for p in pieces)]).join(c.shown,
                                                                          on=DEVICE_KEYS)
        drawn = finish_window(top, c.step, c.lo, c.hi, c.shown, c.busy.height, opts.max_events)
        # exposure and the count from all the activities, not only the longest sent
        exposed = pl.concat([drawn.exposed.head(0), *(_frame(p.exposed) for p in pieces)]) \
            .join(c.shown, on=DEVICE_KEYS, how="semi").sort(*DEVICE_KEYS, "start_ns")
        total = sum(int(p.counts.join(c.shown, on=DEVICE_KEYS, how="semi")["n"].sum())
                    for p in pieces)
        return replace(drawn, exposed=exposed, events_total=total)


def job_window(chosen: Chosen, job: "Job", options: WindowOptions, load: "LoadOptions",
               engine: "EngineOptions", client: object = None) -> TimelineWindow:
    """The window of a job mapped with :class:`WindowChoice` (``chosen``: its result): only
    the owners whose guess missed are read again (:func:`tracelens.engine.hosts.run_again`)."""
    from tracelens.engine.hosts import run_again

    sent = replace(chosen, have=())  # what the hosts read again need of the choice
    return run_again(WindowEvents(), job, [(i, Round2(i, sent, options))
                                           for i in chosen.missing],
                     Round2(-1, chosen, options), load, engine, client)


def window_of_trace(trace: Trace, options: WindowOptions) -> TimelineWindow | None:
    """Both rounds on a trace already loaded (every host here): the window
    :func:`tracelens.analyze.timeline.window.timeline_window` draws for it."""
    plan = JobPlan.of_trace(trace)
    choice = WindowChoice()
    chosen = choice.finish(choice.merge([choice.partial(trace, options)], plan), options)
    if chosen is None:
        return None
    events, again = WindowEvents(), Round2(0, chosen, options)
    return events.finish(events.merge([events.partial(trace, again)
                                       for _ in chosen.missing], plan), again)
