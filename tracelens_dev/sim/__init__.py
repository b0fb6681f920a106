"""A forward discrete-event simulator of one training step on many ranks: the ground truth
for the critical path and the what-if projections (issue 45; docs/simulator.md). It shares no
code with the analyzer (nothing of ``tracelens.analyze``)."""

from tracelens_dev.sim.changes import Change, apply, counterfactual
from tracelens_dev.sim.engine import Sim, simulate
from tracelens_dev.sim.model import (Collective, CopyD2H, GraphLaunch, HostOp, Job, Kernel,
                                     Launch, RecordEvent, Sync, WaitEvent)
from tracelens_dev.sim.path import Path, Piece, critical_path

__all__ = ["Change", "apply", "counterfactual", "Sim", "simulate", "Collective", "CopyD2H",
           "GraphLaunch", "HostOp", "Job", "Kernel", "Launch", "RecordEvent", "Sync",
           "WaitEvent", "Path", "Piece", "critical_path"]
