"""Synthetic training-step traces whose answers are known by construction.

    from tracelens_dev.synth import Scenario, Straggler, build
    syn = build(Scenario(device="mi355x", gpus=8, layers=4, steps=3, overlap=0.7, seed=1))
    syn.trace   # an unclassified tracelens.core.model.Trace: every writer's input
    syn.truth   # the ground truth dict (JSON-ready), computed from the construction

A scenario (hosts × GPUs of one device model, a Llama-like or MoE step of layers, FSDP or DDP
collectives overlapping compute by a chosen amount, optional straggler) becomes a step
*program* (``program``), is run on every device (``schedule``), and turned into a Trace
(``frames``) and its ground truth (``truth``). Writers live in ``tracelens_dev.writers`` (for
XSpace: ``tracelens_dev.writers.xspace.write``); this package never imports them. See
docs/synthetic.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracelens.core.model import Trace
from tracelens_dev.synth.devices import DEVICE_MODELS, DeviceModel, device_model
from tracelens_dev.synth.program import events_per_device_per_step, scaled
from tracelens_dev.synth.scenario import LLAMA_LAYER, MOE_LAYER, Scenario, Straggler

__all__ = ["DEVICE_MODELS", "DeviceModel", "LLAMA_LAYER", "MOE_LAYER", "Scenario", "Straggler",
           "Synthetic", "build", "events_per_device_per_step", "scaled"]


@dataclass
class Synthetic:
    scenario: Scenario
    trace: Trace
    truth: dict[str, Any] | None


def build(sc: Scenario, truth: bool = True) -> Synthetic:
    """The trace of scenario ``sc`` and (unless ``truth=False``, for big runs) its truth."""
    from tracelens_dev.synth.frames import assemble, hostnames
    from tracelens_dev.synth.program import build_program
    from tracelens_dev.synth.schedule import schedule
    from tracelens_dev.synth.truth import compute_truth

    sc.check()
    model = device_model(sc.device)
    prog = build_program(sc, model)
    rec = schedule(prog, sc)
    trace = assemble(sc, model, prog, rec)
    answer = None
    if truth:
        starts = {h: v.profile_start_ns for h, v in trace.meta.hosts.items()}
        answer = compute_truth(sc, model, prog, rec, hostnames(sc, model), starts)
    return Synthetic(scenario=sc, trace=trace, truth=answer)
