"""Notices (``tracelens.core.model.Notice``) as the outputs show them: the same notice of many hosts
said once (a 128-host job must not print the same sentence 128 times with only the file or
host name changed), and the notices the core's stages raise about a whole job."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from tracelens.core.model import Notice

SHOWN_NAMES = 4
"""How many of the hosts (or files) a folded warning names before it just counts them."""

CLIPPED = "load.clipped"  # the loader's same-stream clip (tracelens.loading.loader)
NESTED = "load.nested"  # activities holding the next ones of their stream (the loader)

NOTE_CODES = frozenset({"devices.reported_bandwidth", "load.nested", "steps.partial",
                        "launch.graph_replays"})
"""Notices of a fact the tool corrects itself (a trace's own stat it replaces, and why):
outputs say them once as notes, not as warnings."""


def fold_per_host(notices: Iterable[Notice]) -> list[str]:
    """The notices' texts, those that differ only in the host or file they are about (their
    :attr:`~tracelens.core.model.Notice.kind` is the same) said once: the first one's text, then
    "(the same on N hosts/files: a, b, c, d, ...)" naming each one's subject. Order: each
    folded notice where its first copy stood; others unchanged."""
    groups: dict[object, list[Notice]] = {}
    for i, n in enumerate(notices):  # a notice about no host or file stands alone
        groups.setdefault(n.kind if n.subject is not None else i, []).append(n)
    out = []
    for members in groups.values():
        if len(members) == 1:
            out.append(members[0].text)
            continue
        labels = list(dict.fromkeys(str(n.subject) for n in members))
        more = f", ... {len(labels) - SHOWN_NAMES} more" if len(labels) > SHOWN_NAMES else ""
        out.append(f"{members[0].text} (the same on {len(labels)} hosts/files: "
                   f"{', '.join(labels[:SHOWN_NAMES])}{more})")
    return out


def run_warnings(notices: Sequence[Notice], skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The run's warnings, those repeated per host or file said once (as ``summarize``
    folds them); facts the tool corrects itself (:data:`NOTE_CODES`) are ``summarize``'s
    notes, not warnings. ``skip``: code prefixes of notices that do not bear on the output
    at hand (``cost.``: how FLOPs were counted, for a command that shows none)."""
    return tuple(fold_per_host(n for n in notices if n.code not in NOTE_CODES
                               and not n.code.startswith(skip)))


COSTS = ("cost.",)
"""The code prefix of the notices about FLOPs and bytes (:func:`run_warnings`' ``skip`` for
the outputs that show neither: ``collectives``, ``axes``)."""


def unique(notices: Iterable[Notice]) -> list[Notice]:
    """Each notice once, in order of first appearance (``TraceMeta.warn``'s rule)."""
    return list(dict.fromkeys(notices))


def clipped(n: int, largest_ns: int) -> Notice:
    """The loader's notice of ``n`` same-stream overlaps clipped, the largest ``largest_ns``."""
    return Notice.of(CLIPPED, "clipped {n} same-stream overlaps (largest {largest_ns} ns): an "
                     "in-order stream cannot run two activities at once",
                     n=n, largest_ns=largest_ns)


def nested(n: int, names: Iterable[str]) -> Notice:
    """The loader's notice of ``n`` XLA:CPU ops that held the next ones of their stream whole
    (``names``: theirs): nesting, which the same-stream clip resolves. ``names`` is kept whole
    in its field (distinct, sorted, ``|``-separated) for :func:`nested_total`; the text shows
    the first :data:`SHOWN_NAMES`."""
    every = sorted(set(names))
    shown = ", ".join(every[:SHOWN_NAMES]) + (
        f", ... {len(every) - SHOWN_NAMES} more" if len(every) > SHOWN_NAMES else "")
    return Notice.of(NESTED, "nesting on {n} ops, not overlap: each contains the ones after it "
                     "on its stream ({shown}; XLA runs a while, conditional or call around "
                     "its body's ops); each keeps its time before its first inner op, and the "
                     "inner ops are the device's work", n=n, shown=shown,
                     names="|".join(every))


def nested_total(notices: Iterable[Notice]) -> tuple[int, list[str]]:
    """(ops counted as nesting, their names) over every nesting notice among ``notices`` (one
    per file loaded alone): what :func:`nested` says of them together; (0, []) without one."""
    found = [n for n in notices if n.code == NESTED]
    names = {x for n in found for x in str(n.get("names") or "").split("|") if x}
    return sum(int(n.get("n") or 0) for n in found), sorted(names)


def clipped_total(notices: Iterable[Notice]) -> tuple[int, int]:
    """(overlaps clipped, the largest in ns) over every clip notice among ``notices`` (one per
    file loaded alone), (0, 0) without one."""
    found = [n for n in notices if n.code == CLIPPED]
    return (sum(int(n.get("n") or 0) for n in found),
            max((int(n.get("largest_ns") or 0) for n in found), default=0))


def steps_disagree(sources: Iterable[str]) -> Notice | None:
    """Host files that marked their steps from different sources (some annotated, others
    falling back to a program of their own or to none) are each host's own choice on the
    engine; loading the whole job in one process marks steps once for all hosts and can
    choose differently. Said, not hidden (None when they agree)."""
    counts = Counter(sources)
    if len(counts) < 2:
        return None
    each = ", ".join(f"{src}: {n} host file(s)" for src, n in sorted(counts.items()))
    return Notice.of("steps.hosts_disagree", "steps were marked per host file and the files "
                     "disagree ({each}); marking them once for the whole job (tracelens.load "
                     "of all files) can give other steps", each=each)
