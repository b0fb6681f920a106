"""What a map leaves on its Dask worker: where the engine's cluster
outlives the finish (:attr:`tracelens.engine.hosts.MapOptions.keep`), an analysis keeps a host's
partial in the worker's process (:data:`STORE`) and a :class:`Resident` handle travels in its
place; the finish asks that worker for what it needs (:mod:`~tracelens.analyze.critical.rounds`,
:mod:`~tracelens.analyze.summary.on_workers`) and lets go of it (:func:`drop`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Sequence

from tracelens.engine.cluster import connect, this_worker

STORE: dict[str, object] = {}  # this worker's kept partials, by key


@dataclass(frozen=True)
class Resident:
    """Where a host's partial stayed: its worker and key (what the map returns in its
    place)."""

    scheduler: str
    worker: str
    key: str


def keep(value: object) -> Resident | None:
    """``value`` kept in this Dask worker's process (its handle), or None off a worker."""
    worker = this_worker()
    if worker is None:
        return None
    key = uuid.uuid4().hex
    STORE[key] = value
    return Resident(worker.scheduler.address, worker.address, key)  # type: ignore[attr-defined]


def still_there(client: object, where: Sequence[Resident]) -> None:
    """Every worker that kept a host's partial is still in the cluster; else one error (a
    task pinned to a worker that left would wait for it forever)."""
    from tracelens.core.errors import TraceInputError

    info = client.scheduler_info()  # type: ignore[attr-defined]
    known = set(info.get("workers", {}))
    gone = sorted({r.worker for r in where} - known)
    if gone:
        raise TraceInputError(where[0].scheduler, f"worker {gone[0]} kept hosts' partials "
                              f"after the map and has left the cluster ({len(gone)} gone); "
                              "run again (TRACELENS_CRITICAL_ROUNDS=0 brings every part back "
                              "to this process instead)")


def drop_on(client: object, where: Sequence[Resident]) -> None:
    """Let go of the partials ``where`` stayed, on the workers still there."""
    alive = set(client.scheduler_info().get("workers", {}))  # type: ignore[attr-defined]
    client.gather([client.submit(_drop, r.key, workers=[r.worker],  # type: ignore[attr-defined]
                                 allow_other_workers=False, pure=False)
                   for r in where if r.worker in alive])


def drop(parts: Sequence[object]) -> None:
    """Let go of the partials kept on their workers among ``parts`` (handles; anything else
    is skipped)."""
    where = [p for p in parts if isinstance(p, Resident)]
    if not where:
        return
    with connect(where[0].scheduler) as client:
        drop_on(client, where)


def take(key: str) -> object:
    """The kept partial, let go here (handed to Dask: it moves to whoever needs it)."""
    return STORE.pop(key)


def _drop(key: str) -> None:
    STORE.pop(key, None)
