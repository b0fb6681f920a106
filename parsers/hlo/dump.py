"""Programs for the HLO lens: a module with its schedule, from a trace's ``HloProto`` or from an
XLA dump (``*.after_optimizations.txt``, a serialized ``HloProto`` or ``HloModuleProto``).

The schedule is ``HloModuleProto.schedule`` (field 7: computation id → instruction ids in run
order, hlo.md §2); a text dump of a module marked ``is_scheduled=true`` prints each
computation's instructions in schedule order.
"""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf.message import DecodeError  # cheap: no descriptors

from parsers.hlo.proto import module_from_proto
from parsers.hlo.text import _FILE_ID, parse_module
from parsers.rawfile import read_maybe_gzip
from tracelens.core.errors import TraceInputError
from tracelens.core.hlo_model import Module, Schedule
TEXT_SUFFIXES = (".txt", ".hlo")
# The optimized module of an XLA dump directory (--xla_dump_to): module_0004.jit_f.
# after_optimizations.txt, or with the backend before it (cpu_after_optimizations,
# sm_9.0_gpu_after_optimizations, gfx942_gpu_after_optimizations); .hlo.pb with
# --xla_dump_hlo_as_proto. Buffer assignments, memory reports, LLVM IR and the passes before
# optimization are other files.
_OPTIMIZED = re.compile(r"^module_(\d+)\..*[._]after_optimizations\.(txt|hlo\.pb)$")


def schedule_from_proto(data: bytes) -> Schedule | None:
    """The module's schedule by names; None when the proto carries none."""
    from parsers.hlo.schema import hlo_proto_class  # protobuf: only when a proto is read

    proto = hlo_proto_class()()
    proto.ParseFromString(data)
    hm = proto.hlo_module
    if not hm.HasField("schedule") or not len(hm.schedule.sequences):
        return None
    comps = {c.id: c for c in hm.computations}
    out: Schedule = {}
    for entry in hm.schedule.sequences:
        comp = comps.get(entry.key)
        if comp is None:
            continue
        names = {i.id: i.name for i in comp.instructions}
        out[comp.name] = [names[i] for i in entry.value.instruction_ids if i in names]
    return out


def _as_hlo_proto(data: bytes) -> bytes:
    """``data`` as an ``HloProto``: a bare ``HloModuleProto`` is wrapped as its field 1."""
    from parsers.hlo.schema import hlo_proto_class  # protobuf: only when a proto is read

    proto = hlo_proto_class()()
    try:
        proto.ParseFromString(data)
        if proto.hlo_module.computations:
            return data
    except DecodeError:
        pass
    wrapped = b"\x0a" + _varint(len(data)) + data
    proto = hlo_proto_class()()
    proto.ParseFromString(wrapped)  # DecodeError when it is neither
    if not proto.hlo_module.computations:
        raise ValueError("no HLO computations in it")
    return wrapped


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def find_dumps(directory: Path) -> list[Path]:
    """The optimized module files of an XLA dump directory, one per module: its serialized
    ``HloProto`` when dumped (it carries the schedule), else its text; in module order."""
    best: dict[tuple[int, str], Path] = {}
    for p in sorted(directory.rglob("module_*")):
        m = _OPTIMIZED.match(p.name)
        if m is None or not p.is_file():
            continue
        key = (int(m.group(1)), str(p.parent))
        if key not in best or m.group(2) == "hlo.pb":
            best[key] = p
    return [best[k] for k in sorted(best)]


def load_dump(path: Path) -> tuple[Module, Schedule | None]:
    """A module and its schedule from an HLO dump file (gunzipped when it is gzip); bad
    files raise ``TraceInputError``. Read through :mod:`parsers.rawfile`, so a dump is held
    to the same memory and inflation budgets as every input."""
    data = read_maybe_gzip(path)
    m = _FILE_ID.search(path.name)
    pid = int(m.group(1)) if m else None
    if path.name.endswith(TEXT_SUFFIXES):
        try:
            text = data.decode("utf-8")
            module = parse_module(text, program_id=pid)
        except (UnicodeDecodeError, ValueError, IndexError, KeyError) as exc:
            raise TraceInputError(path, f"not an HLO text dump ({exc})") from None
        if module.entry not in module.computations:
            raise TraceInputError(path, f"truncated HLO text dump: the entry computation "
                                        f"{module.entry} does not end")
        head = text.lstrip().split("\n", 1)[0]
        scheduled = "is_scheduled=true" in head
        schedule = {c.name: list(c.instructions) for c in module.computations.values()} \
            if scheduled else None
        return module, schedule
    try:
        blob = _as_hlo_proto(data)
        module = module_from_proto(blob, program_id=pid)
        return module, schedule_from_proto(blob)
    except (DecodeError, ValueError, KeyError, IndexError, RuntimeError) as exc:
        raise TraceInputError(path, f"not a serialized HloProto/HloModuleProto ({exc})") from None
