"""The what-ifs of XLA host work (docs/critical-path.md, "XLA host work"), as arrays over one
graph's nodes, so that the whole job's graph (:mod:`tracelens.analyze.critical.path`) and each
host's side of the rounds (:mod:`tracelens.analyze.critical.host_side`) make the same change:

- ``host``: the host's own untraced time takes none (the gaps between the calls of each host
  thread; the windows' host tails go with it, :func:`~tracelens.analyze.critical.walk.
  window_lengths` ``no_tail``);
- ``sync``: the host stops waiting for results each step: its sync calls take no time after
  the device work they waited for, completions (:data:`~tracelens.analyze.critical.graph.
  COMPLETION`) end no window, with the ``host`` change;
- ``transfer``: host-to-device copies take no time: their calls take none, nor the wait after
  each on its thread;
- ``dispatch``: the step is dispatched at once (one jitted program): the host's calls between
  its first and last dispatch of a rank's window (argument transfers and completions
  included, sync calls not) take no time, nor the untraced time before them.

``n``: the node count; arrays given longer (a host side's graph holds its instances' sentinel
nodes after its own) are read to ``n``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tracelens.analyze.critical.graph import COMPLETION, XLA_DISPATCH, XLA_TRANSFER
from tracelens.core.text import matches

XLA_CHANGES = ("host", "sync", "transfer", "dispatch")

MIN_DISPATCHES = 8
"""The launches a rank's window must hold for its host work to be op-by-op dispatch (the
``dispatch`` what-if): the real eager runs hold 257 (XLA:CPU) and 336 (TPU) a step, the
eager TPU sample 28; every jitted run one or two."""
"""The changes of this module, in the order they are listed."""


def _mask(nodes: pl.DataFrame, pattern: str) -> np.ndarray:
    return (matches(nodes, "name", pattern).fill_null(False)
            & ~nodes["device_node"]).to_numpy()


def has_dispatch(nodes: pl.DataFrame) -> bool:
    """Whether the graph holds XLA dispatches: the XLA what-ifs apply (elsewhere the host's
    work between calls is read as it always was: ``graph_launch`` moves launches)."""
    return bool(_mask(nodes, XLA_DISPATCH).any()) if nodes.height else False


def completions(nodes: pl.DataFrame) -> np.ndarray:
    return _mask(nodes, COMPLETION)


def host_lag(nodes: pl.DataFrame, first: np.ndarray, prev_lag: np.ndarray) -> np.ndarray:
    """``host``: each host thread's untraced time before its calls, none."""
    n = nodes.height
    host = ~nodes["device_node"].to_numpy()
    return np.where(host & ~first[:n], np.minimum(prev_lag[:n], 0.0), prev_lag[:n])


def sync_calls(nodes: pl.DataFrame) -> np.ndarray:
    """The host's sync calls (blocking, not completions)."""
    return nodes["sync"].fill_null(False).to_numpy() & ~nodes["device_node"].to_numpy() \
        & ~completions(nodes)


def waited(nodes: pl.DataFrame, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The sync calls that waited inside them for the device (begin after start)."""
    n = nodes.height
    return sync_calls(nodes) & (b[:n] > s[:n])


def sync_w(nodes: pl.DataFrame, w: np.ndarray) -> np.ndarray:
    """``sync``: the sync calls' own work (after what they waited for), none."""
    return np.where(sync_calls(nodes), 0.0, w[:nodes.height])


def transfer(nodes: pl.DataFrame, first: np.ndarray, prev_lag: np.ndarray, w: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """``transfer``: (work, chain lags); None without XLA transfer calls."""
    n = nodes.height
    call = _mask(nodes, XLA_TRANSFER)
    if not call.any():
        return None
    after = np.r_[False, call[:-1]] & ~first[:n]
    return (np.where(call, 0.0, w[:n]),
            np.where(after, np.minimum(prev_lag[:n], 0.0), prev_lag[:n]))


def dispatch(nodes: pl.DataFrame, first: np.ndarray, prev_lag: np.ndarray, w: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """``dispatch``: (work, chain lags); None where no rank's window holds
    :data:`MIN_DISPATCHES` launches, or no host call lies between their first and last
    dispatch."""
    n = nodes.height
    xla = _mask(nodes, XLA_DISPATCH)
    if not xla.any():
        return None
    key = ["host", "rank"]
    # op by op: ranks whose window holds many launches (a jitted step holds one or two)
    many = nodes.filter(pl.Series(xla) & pl.col("correlation_id").is_not_null()).group_by(
        key).len().filter(pl.col("len") >= MIN_DISPATCHES).select(key)
    if many.is_empty():
        return None
    span = nodes.filter(pl.Series(xla)).join(many, on=key).group_by(key).agg(
        _a=pl.col("start_ns").min(), _z=pl.col("end_ns").max())
    inside = nodes.select(*key, "start_ns", "end_ns").join(
        span, on=key, how="left", maintain_order="left").select(
        (pl.col("start_ns") >= pl.col("_a")) & (pl.col("end_ns") <= pl.col("_z"))
    ).to_series().fill_null(False).to_numpy()
    calls = ~nodes["device_node"].to_numpy() & ~sync_calls(nodes) & inside
    if not calls.any():
        return None
    return (np.where(calls, 0.0, w[:n]),
            np.where(calls, np.minimum(prev_lag[:n], 0.0), prev_lag[:n]))


def dispatch_nodes(nodes: pl.DataFrame) -> np.ndarray:
    return _mask(nodes, XLA_DISPATCH)
