"""Damaged Kineto documents are read with every loss counted, or refused (issue 25 item 13).

Seeded random mutations of real Kineto traces: null, wrong-typed, NaN-like, negative and
huge values, deleted keys, events that are not objects, records written twice, shuffled and
truncated event lists. Each mutated file either loads (the model check passes) or is refused
with :class:`TraceInputError` (one line): never another exception. And never a silent
partial result: every device activity of the document that is not read is counted in a
warning (the counts the warnings give add up to at least what is missing), and no activity is
read twice.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests.conftest import SHARED
from tracelens.core.errors import TraceInputError
from tracelens.core.model import validate

KINETO = SHARED / "traces" / "kineto"
BASES = ["mi250_rocm62_minitoy_train.json.gz", "mi300x_inference/sglang_qwen3_8b_decode.json.gz"]
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
WRONG = [None, "x", "", "12", 1.5, -1, True, {}, [], [1], 1 << 70, -(1 << 70), 1e300]
NOT_STR = [v for v in WRONG if type(v) is not str]
KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]
ARG_KEYS = ["device", "stream", "correlation", "External id", "bytes", "grid", "block"]
SEEDS = range(16)
# the warnings that count device activity not read, and where their count is
_LOST = [re.compile(r"\((\d+) of them device activity\)"),
         re.compile(r"skipped (\d+) device activities"),
         re.compile(r"skipped (\d+) events whose cat is not a string"),
         re.compile(r"skipped (\d+) complete events \(ph 'X'\) without a cat"),
         re.compile(r"skipped (\d+) events without a ph"),
         re.compile(r"skipped (\d+) trace events that are not JSON objects")]


@pytest.fixture(scope="module")
def docs() -> dict[str, dict[str, Any]]:
    if not KINETO.exists():
        pytest.skip(f"{KINETO} not present")
    return {b: json.loads(gzip.decompress((KINETO / b).read_bytes())) for b in BASES}


def _is_device(e: Any) -> bool:
    return type(e) is dict and e.get("cat") in DEVICE and e.get("ph") == "X"


def _mutate(events: list[Any], rng: random.Random) -> int:
    """Damage ``events`` in place; the number of device activities it still holds, each
    counted once (what a reader must read or count as lost)."""
    if rng.random() < 0.3:
        rng.shuffle(events)
    if rng.random() < 0.2:
        del events[rng.randrange(len(events) // 2, len(events)):]
    held = sum(map(_is_device, events))
    device = [e for e in events if _is_device(e)]
    for _ in range(rng.randint(1, 6)):
        pool = device if device and rng.random() < 0.7 else events
        for e in rng.sample(pool, k=max(1, len(pool) // rng.choice([4, 20, 100]))):
            if type(e) is not dict:
                continue
            obj, key = e, rng.choice(KEYS)
            if key == "args" and type(e.get("args")) is dict and rng.random() < 0.7:
                obj, key = e["args"], rng.choice(ARG_KEYS)
            if rng.random() < 0.2:
                obj.pop(key, None)
            else:  # another string category is another kind of event, not damage
                obj[key] = copy.deepcopy(rng.choice(NOT_STR if key == "cat" else WRONG))
    if rng.random() < 0.4:  # records written twice
        copies = [copy.deepcopy(e) for e in rng.sample(events, k=min(len(events), 20))]
        for c in copies:
            events.insert(rng.randrange(len(events) + 1), c)
    if rng.random() < 0.2:
        for v in rng.sample(WRONG, k=3):
            events.insert(rng.randrange(len(events) + 1), v)
    return held


def _counted(warnings: list[str]) -> int:
    return sum(int(m.group(1)) for w in warnings for p in _LOST for m in p.finditer(w))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("seed", SEEDS)
def test_mutated_kineto_is_read_with_every_loss_counted_or_refused(
        docs: dict[str, dict[str, Any]], tmp_path: Path, base: str, seed: int) -> None:
    doc = copy.deepcopy(docs[base])
    held = _mutate(doc["traceEvents"], random.Random(seed))
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    try:
        trace = tracelens.load(path)
    except TraceInputError as exc:
        assert exc.problem and "\n" not in exc.problem
        assert not exc.problem.startswith("unreadable ("), exc.problem  # a reader crash
        return
    assert validate(trace) == []
    read = trace.events.height
    assert read <= held, "an activity was read twice"
    assert held - read <= _counted(trace.meta.warnings), (held, read, trace.meta.warnings)


def test_the_mutations_leave_most_files_readable(docs: dict[str, dict[str, Any]],
                                                 tmp_path: Path) -> None:
    """The campaign above is not vacuous: most mutated files load, with losses."""
    loaded = lossy = 0
    for seed in SEEDS:
        doc = copy.deepcopy(docs[BASES[0]])
        held = _mutate(doc["traceEvents"], random.Random(seed))
        path = tmp_path / f"rank0_{seed}.json"
        path.write_text(json.dumps(doc))
        try:
            trace = tracelens.load(path)
        except TraceInputError:
            continue
        loaded += 1
        lossy += trace.events.height < held
    assert loaded >= len(SEEDS) // 2 and lossy >= len(SEEDS) // 4, (loaded, lossy)
