"""Counterfactual step times of a scenario, by regenerating it with one change: the ground
truth that the critical path's what-ifs (``tracelens critical-path``) are checked against on
the bundled samples (issue 45, tests/test_critical_samples_truth.py).

A change is a :class:`~tracelens_dev.synth.scenario.Scenario` that differs in one knob
(``straggler=None``: the delay removed; ``hidden_collectives``: a collective type perfectly
overlapped). Every random draw of the schedule is made in the same order whatever the knobs,
so the variant is the same job with only that change.

The step time compared is the one the what-ifs project: a step's window whose end moves with
the last activity of the step's work, its idle tail kept (the marker's time after the devices
finish, or before a fixed-length marker's end). Per host: the window's length in the original,
less how much sooner the step's work ends (measured from the step's start) in the variant; the
job's step is its longest host window.
"""

from __future__ import annotations

import numpy as np

from tracelens_dev.synth.devices import device_model
from tracelens_dev.synth.program import build_program
from tracelens_dev.synth.scenario import Scenario
from tracelens_dev.synth.schedule import Records, schedule


def records(sc: Scenario) -> Records:
    """The construction of ``sc`` (every activity's start and end), without a trace."""
    sc.check()
    return schedule(build_program(sc, device_model(sc.device)), sc)


def _work_spans(rec: Records, gpus: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Per host: (the step's marker length, the end of the step's work less its start)."""
    marker, work = [], []
    for h in np.unique(rec.step_host):
        row = (rec.step_host == h) & (rec.step_num == step)
        start, end = int(rec.step_start[row][0]), int(rec.step_end[row][0])
        mine = (rec.dev // gpus == h) & (rec.launch_step == step)
        marker.append(end - start)
        work.append(int(rec.end[mine].max()) - start)
    return np.asarray(marker, np.int64), np.asarray(work, np.int64)


def step_saving_ns(original: Scenario, variant: Scenario, step: int) -> int:
    """How much shorter step ``step`` (the job's longest host window, module doc) is in
    ``variant`` than in ``original``."""
    marker, work = _work_spans(records(original), original.gpus, step)
    _, work_v = _work_spans(records(variant), variant.gpus, step)
    now = np.minimum(marker, marker - (work - work_v))
    return int(marker.max() - now.max())
