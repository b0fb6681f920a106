"""The report's step timeline: the median step, bounded, escaped, exposure marked."""

from __future__ import annotations

import polars as pl

import tracelens
from reports.html.figures_window import step_timeline_figure
from tracelens.analyze.timeline.window import median_step, timeline_window
from tracelens.core.model import Trace

from .conftest import SAMPLES
from .test_idle import planted

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"


def test_median_step_by_mean_span() -> None:
    steps = pl.DataFrame({"rank": [0, 0, 0, 1, 1, 1], "step": [0, 1, 2, 0, 1, 2],
                          "start_ns": [0, 10, 40, 0, 10, 40],
                          "end_ns": [10, 40, 45, 10, 40, 45]})
    assert median_step(steps) == 0  # spans 10, 30, 5: the median is 10
    assert median_step(steps.head(0)) is None


def test_window_holds_the_step_and_every_bar_is_drawn() -> None:
    t = tracelens.load(SAMPLE)
    w = timeline_window(t, max_devices=2)
    assert w is not None and w.step == median_step(t.steps)
    st = t.steps.filter(pl.col("step") == w.step)
    assert (w.start_ns, w.end_ns) == (st["start_ns"].min(), st["end_ns"].max())
    assert w.devices_shown == 2 and w.devices_total == 8
    assert w.events["start_ns"].min() >= w.start_ns and w.events["end_ns"].max() <= w.end_ns
    fig = step_timeline_figure(w, many_hosts=False)
    bars = [tr for tr in fig["data"] if tr["name"] != "exposed communication"]
    assert sum(len(tr["x"]) for tr in bars) == w.events.height
    exposed = [tr for tr in fig["data"] if tr["name"] == "exposed communication"]
    assert sum(len(tr["x"]) for tr in exposed) == w.exposed.height > 0


def test_window_caps_the_activities_and_says_so() -> None:
    t = tracelens.load(SAMPLE)
    w = timeline_window(t, max_events=50)
    assert w.events.height == 50 < w.events_total


def test_hostile_names_are_escaped_in_the_figure() -> None:
    base = planted()
    evil = "<img src=x onerror=alert(1)>%{y}"
    t = Trace(events=base.events.with_columns(host=pl.lit(evil), name=pl.lit(evil)),
              host_events=base.host_events, steps=base.steps,
              devices=base.devices.with_columns(host=pl.lit(evil)))
    import json

    fig = step_timeline_figure(timeline_window(t), many_hosts=True)
    text = json.dumps(fig)
    assert "<img" not in text and "&lt;img" in text
    # a name inside a hover template cannot become a placeholder
    assert all("%{y}" not in tr["hovertemplate"] for tr in fig["data"])
