"""Which files a path holds, what format each one is, and the reader of each format.

Discovery walks a directory for the files of one job; sniffing tells a file's format from its
content (a JSON document from its top-level keys, wherever they are), never from its name
alone, except for other tools' binary files (a Perfetto
trace is a protobuf like an XSpace), which are named by their suffix to say what they are.
:data:`READERS` holds one entry per format, so a new reader plugs in with one line. The only
place in the core that knows the parsers (each imported when its first file is read;
``tests/test_layers.py`` checks it): the XLA programs a trace carries or an XLA dump holds
are decoded here too (:func:`decode_hlo` and the dump readers below, :mod:`parsers.hlo`).
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable

from tracelens.core.errors import TraceInputError
from tracelens.loading.json_kind import json_kind
from tracelens.core.model import Notice, Trace
from tracelens.loading.paths.walk import walk_files

if TYPE_CHECKING:
    import polars as pl

    from tracelens.core.hlo_model import Module, Schedule

XSPACE_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")
RPD_SUFFIXES = (".rpd", ".rpd.gz")
_SNIFF_BYTES = 1 << 16


def sniff_format(path: Path) -> str:
    """The format of one file, from its first bytes (and, for gzip, its first inflated bytes):
    SQLite, protobuf and CSV headers from the first 64 KiB; a JSON document from its
    top-level keys wherever they are (:mod:`tracelens.loading.json_kind`)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
            if head[:2] == b"\x1f\x8b":
                return _sniff_gzip(path)
            return _sniff(path, head, fh)
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None


def _sniff_gzip(path: Path) -> str:
    try:
        with gzip.open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
            if not head:
                raise TraceInputError(path, "empty file (after gunzip)")
            return _sniff(path, head, fh, gz=True)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceInputError(path, f"corrupt or truncated gzip data ({exc})") from None


def _sniff(path: Path, head: bytes, rest: IO[bytes], gz: bool = False) -> str:
    """The format of a file whose first bytes are ``head``, ``rest`` the stream after them
    (``gz``: inflated from a gzip file)."""
    if head.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark before JSON or CSV text
        head = head[3:]
    if not head:
        raise TraceInputError(path, "empty file")
    if head.startswith(b"SQLite format 3\x00"):
        return _sqlite_kind(path, head, gz)
    if head.lstrip()[:1] in (b"{", b"["):
        return json_kind(rest, head)
    foreign = _foreign_by_name(path.name)  # binary files of other tools that may look like
    if foreign:                            # an XSpace (a Perfetto trace is a protobuf too)
        return foreign
    if head[:1] == b"\x0a":
        return "xspace"
    if path.name.endswith(XSPACE_SUFFIXES):
        return "xspace"  # let the XSpace reader say precisely what is wrong
    foreign = _foreign_csv(head)
    if foreign:
        return foreign
    if _is_rocprof_csv_header(head):
        return "rocprof-csv"
    return "csv" if path.name.lower().endswith(".csv") else "unknown"


_RPD_TABLE = re.compile(rb'CREATE TABLE (?:IF NOT EXISTS )?"?rocpd_op"?\s*\(')


def _sqlite_kind(path: Path, head: bytes, gz: bool) -> str:
    """``rpd`` for a rocmProfileData database (a ``rocpd_op`` table and no rocprofv3
    ``rocpd_kernel_dispatch``), else ``sqlite`` (rocprofv3's rocpd; its reader says what
    any other database is). The table list is read with SQLite, read-only and bounded, as
    the readers open the file (:mod:`parsers.rocprof.sqlite_db`); a
    gzipped database is told from the schema text in its first inflated bytes."""
    if gz:  # the inflated head is all there is to look at without inflating the file
        return "rpd" if _RPD_TABLE.search(head) and b"rocpd_kernel_dispatch" not in head \
            else "sqlite"
    from parsers.rocprof.sqlite_db import table_names
    names = table_names(path)  # as SQLite reads it: with its -wal or hot journal applied
    return "rpd" if "rocpd_op" in names and not any(
        n.startswith("rocpd_kernel_dispatch") for n in names) else "sqlite"


# Column names of rocprofv3 CSV files (kernel, API, memory-copy and agent tables, every
# ROCm version and the rocpd-convert variant); a header naming three of them is rocprofv3's.
_ROCPROF_CSV_COLUMNS = frozenset({
    "guid", "kind", "agent_id", "queue_id", "stream_id", "thread_id", "dispatch_id",
    "kernel_id", "kernel_name", "correlation_id", "start_timestamp", "end_timestamp",
    "domain", "function", "process_id", "direction", "source_agent_id",
    "destination_agent_id", "node_id", "logical_node_id", "agent_type", "cu_count",
    "gfx_target_version", "max_engine_clk_fcompute"})


def _header_names(head: bytes) -> set[str]:
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    return {c.strip().strip('"').strip().lower() for c in line.split(",")}


def _is_rocprof_csv_header(head: bytes) -> bool:
    return len(_header_names(head) & _ROCPROF_CSV_COLUMNS) >= 3


# Outputs of other tools (shared/reference/rocprof.md §2.6-2.8), told apart so the error says
# what the file is and what to give instead. Each is a format name of _UNSUPPORTED.
_FOREIGN_SUFFIXES = {
    ".pftrace": "pftrace", ".perfetto-trace": "pftrace", ".otf2": "otf2",
    ".nsys-rep": "nsys", ".qdrep": "nsys", ".ncu-rep": "ncu",
}
# (columns that must all be in the header, format): most specific first
_FOREIGN_CSV = (
    ({"kernelname", "beginns", "endns"}, "rocprof-v1-csv"),
    ({"name", "calls", "totaldurationns"}, "stats-csv"),
    ({"gpu_id", "kernel_name", "counter_name", "counter_value"}, "rocprof-compute-csv"),
    ({"gpu_id", "kernel_name", "start_timestamp", "end_timestamp"}, "rocprof-v2-csv"),
)


def _foreign_by_name(name: str) -> str | None:
    lower = name.lower().removesuffix(".gz")
    return next((fmt for suffix, fmt in _FOREIGN_SUFFIXES.items() if lower.endswith(suffix)),
                None)


def _foreign_csv(head: bytes) -> str | None:
    names = _header_names(head)
    if "agent_id" in names:  # rocprofv3's own tables (the counter CSV also has Kernel_Name)
        return None
    return next((fmt for need, fmt in _FOREIGN_CSV if need <= names), None)


def find_inputs(path: Path) -> list[Path]:
    """Trace files behind one path: the file itself, the XSpace files of one profile run, or
    the rocprofv3 outputs of a directory (one file per process: ``<pid>_results.db``, else
    ``<pid>_results.json[.gz]``, else ``<pid>_kernel_trace.csv`` standing for its CSV set),
    and its ``rpd_tracer`` ``*.rpd[.gz]`` files."""
    return discover(path)[0]


def discover(path: Path) -> tuple[list[Path], list[Notice]]:
    """:func:`find_inputs`, and a note for each rocprofv3 process whose trace the folder
    also holds in another format (which one was read, which were not)."""
    if not path.exists():
        raise TraceInputError(path, "no such file or directory")
    if path.is_file():
        return [path], []
    if not path.is_dir():
        raise TraceInputError(path, "not a regular file or directory")
    files, unread = walk_files(path, _traceish)
    if unread:  # part of the job may be there: refused, never read in part
        where, why = unread[0]
        more = f" (and {len(unread) - 1} more: {', '.join(str(p) for p, _ in unread[1:4])}" \
            f"{', ...' if len(unread) > 4 else ''})" if len(unread) > 1 else ""
        raise TraceInputError(where, f"{why}: it may hold part of the job in {path}, so the "
                              f"job is not read in part{more}")
    # several profile runs are several jobs unless their files say they were recorded together
    # (tracelens.loading.jobs): hosts of one job may name their run folders a second apart
    found = [p for p in files if p.name.endswith(XSPACE_SUFFIXES)]
    rocprof, notes = _rocprof_outputs(files)
    found += rocprof
    found += [p for p in files if p.name.endswith(RPD_SUFFIXES)]  # rpd_tracer: one per run
    found += [p for p in files if p.name.endswith((".json", ".json.gz")) and p not in found
              and sniff_format(p) == "kineto"]  # PyTorch profiler: one file per rank
    if not found:
        foreign = [p for p in files if _foreign_by_name(p.name)]
        said = (f"; it holds {_UNSUPPORTED[_foreign_by_name(foreign[0].name) or '']} "
                f"({foreign[0].relative_to(path)}"
                f"{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''})"
                if foreign else "")
        raise TraceInputError(path, "directory holds no trace files (*.xplane.pb[.gz], "
                              "rocprofv3 *_results.db, *_results.json, *_kernel_trace.csv, "
                              f"rpd_tracer *.rpd, or Kineto *.json[.gz]){said}")
    return sorted(found), notes


def _traceish(name: str) -> bool:
    """Whether a file of this name would be read as part of a job (:func:`discover`)."""
    lower = name.lower()
    return lower.endswith((*XSPACE_SUFFIXES, *RPD_SUFFIXES, ".json", ".json.gz", ".db",
                           ".csv"))


# rocprofv3 output names (shared/reference/rocprof.md §1.3), by preference: one per process.
_ROCPROF_OUTPUTS = ("_results.db", "_results.json", "_results.json.gz",
                    "_kernel_trace.csv", "_counter_collection.csv")


def _rocprof_outputs(files: list[Path]) -> tuple[list[Path], list[Notice]]:
    """One output per process (the preferred format), and a note naming the ones left out.
    A ``counter_collection.csv`` stands for its process only without a kernel trace beside it
    (``--pmc`` alone); with one, the CSV reader takes it as part of that CSV set."""
    seen: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    for p in files:
        name = "_" + p.name if p.name in ("kernel_trace.csv", "counter_collection.csv") \
            else p.name
        for rank, suffix in enumerate(_ROCPROF_OUTPUTS):
            if name.endswith(suffix):
                seen.setdefault((p.parent, name[: -len(suffix)]), []).append((rank, p))
                break
    chosen, notes = [], []
    for (folder, _), outs in sorted(seen.items()):
        outs.sort()
        chosen.append(outs[0][1])
        if outs[0][1].name.endswith("kernel_trace.csv"):  # its CSV set holds the counters
            outs = [o for o in outs if not o[1].name.endswith("counter_collection.csv")]
        if len(outs) > 1:
            notes.append(Notice.of(
                "discover.same_run", "{folder}: read {file}; the same rocprofv3 run is also "
                "there as {others} (not read)", folder=str(folder), file=outs[0][1].name,
                others=", ".join(p.name for _, p in outs[1:])))
    return chosen, notes


@dataclass(frozen=True)
class Reader:
    """How one format is read. ``read(path, step_marker, threads)``: ``step_marker`` is the
    ``--step-marker`` regex (readers that keep matching host annotations use it), ``threads``
    the native decoder's share of the CPUs (None: its own default). ``native``: the reader
    spends its time in code that releases the GIL (read several at once in threads); else it
    parses in Python (worker processes)."""

    read: Callable[[Path, str | None, int | None], Trace]
    native: bool


def _xspace(path: Path, step_marker: str | None, threads: int | None) -> Trace:
    from parsers import xspace as xspace_reader
    # host annotations matching the marker are kept as host events of kind "marker"
    return xspace_reader.read(path, marker=step_marker, threads=threads)


def _kineto(path: Path, step_marker: str | None, threads: int | None) -> Trace:
    from parsers import kineto
    return kineto.read(path)


# rocprofv3: ROCTx ranges are host events of kind "marker"; tracelens.loading.steps makes the steps
def _rocpd(path: Path, step_marker: str | None, threads: int | None) -> Trace:
    from parsers import rocprof
    return rocprof.read_rocpd(path)


def _rpd(path: Path, step_marker: str | None, threads: int | None) -> Trace:
    from parsers import rocprof
    return rocprof.read_rpd(path)


def _rocprof_json(path: Path, step_marker: str | None, threads: int | None) -> Trace:
    from parsers import rocprof
    return rocprof.read_json(path)


def _rocprof_csv(path: Path, step_marker: str | None, threads: int | None) -> Trace:
    from parsers import rocprof
    return rocprof.read_csv(path)


READERS: dict[str, Reader] = {
    "xspace": Reader(_xspace, native=True),
    "kineto": Reader(_kineto, native=False),
    "sqlite": Reader(_rocpd, native=False),
    "rpd": Reader(_rpd, native=False),
    "rocprof-json": Reader(_rocprof_json, native=False),
    "rocprof-csv": Reader(_rocprof_csv, native=False),
}
"""One reader per format :func:`sniff_format` names."""

def read_memory_events(path: Path) -> "tuple[pl.DataFrame, str | None]":
    """The allocator events of one trace file (``tracelens.core.model.MEMORY_SCHEMA``), and, for
    a format whose memory events are not read, why (the frame is then empty)."""
    from tracelens.core.model import empty_memory

    fmt = sniff_format(path)
    if fmt == "xspace":
        from parsers.xspace.memory import read_memory
        return read_memory(path), None
    if fmt == "kineto":
        from parsers.kineto.memory import read_memory as read_kineto
        return read_kineto(path), None
    reader_for(fmt, path)  # an unreadable format is the same error as for every command
    return empty_memory(), (f"the memory events of {fmt} traces are not read (rocprofv3 "
                            "--memory-allocation-trace: no real trace with them seen yet)")


_V3 = "rocprofv3 output (--kernel-trace or --sys-trace: the rocpd .db, .json or .csv files)"
_UNSUPPORTED = {
    "chrome-json": "a Chrome trace JSON (not supported yet; pass the .xplane.pb or the "
                   "rocprofv3 output)",
    "json": "JSON of an unknown kind, not a trace format tracelens reads",
    "csv": "a CSV file that is not rocprofv3 output (no rocprofv3 column names in its header)",
    "rocprof-v1-csv": f"rocprof (v1) results.csv, not read: tracelens reads {_V3}",
    "rocprof-v1-json": f"rocprof (v1) results.json (a Chrome trace), not read: tracelens reads "
                       f"{_V3}",
    "rocprof-v2-csv": f"rocprofv2 CSV output, not read: tracelens reads {_V3}",
    "rocprof-compute-csv": "rocprof-compute (Omniperf) counter data (pmc_perf.csv), not read: "
                           f"tracelens reads {_V3}",
    "stats-csv": "a statistics table (--stats: Name, Calls, TotalDurationNs), which has no "
                 "per-dispatch times; pass the kernel_trace.csv or the .db/.json beside it",
    "pftrace": "a Perfetto trace (.pftrace), not read: its kernel times are moved where "
               "kernels overlap on a track; pass rocprofv3's rocpd .db, .json or .csv output",
    "otf2": "an OTF2 archive, not read; pass rocprofv3's rocpd .db, .json or .csv output",
    "nsys": "an Nsight Systems report, not read; pass a PyTorch profiler (Kineto) JSON or a "
            "jax.profiler .xplane.pb",
    "ncu": "an Nsight Compute report (per-kernel metrics, no timeline), not read; pass a "
           "PyTorch profiler (Kineto) JSON or a jax.profiler .xplane.pb",
}


def reader_for(fmt: str, path: Path) -> Reader:
    """The reader of a format, or the input error that says what the file is instead."""
    reader = READERS.get(fmt)
    if reader is None:
        raise TraceInputError(path, _UNSUPPORTED.get(
            fmt, "not a trace format tracelens reads (expected an XSpace .xplane.pb, a "
                 "PyTorch profiler (Kineto) JSON, or rocprofv3 .db/.json/.csv output)"))
    return reader


# XLA programs: the serialized HloProto of a trace's modules (``trace.modules.hlo_proto``)
# and the files of an XLA dump, decoded by parsers.hlo into tracelens.core.hlo_model (imported on
# first use: protobuf's descriptors only load when a program is decoded).


def decode_hlo(blob: bytes, program_id: int | None = None) -> Module:
    """One serialized ``HloProto``; ``program_id`` defaults to ``HloModuleProto.id``."""
    from parsers.hlo.proto import module_from_proto
    return module_from_proto(blob, program_id=program_id)


def hlo_schedule(blob: bytes) -> Schedule | None:
    """The schedule of a serialized ``HloProto`` by names; None when it carries none."""
    from parsers.hlo.dump import schedule_from_proto
    return schedule_from_proto(blob)


def read_hlo_text(path: str | Path, program_id: int | None = None) -> Module:
    """An HLO text dump (``module_<id>.*.txt``: the id from the name unless given)."""
    from parsers.hlo.text import load_text_dump
    return load_text_dump(path, program_id)


def read_hlo_dump(path: Path) -> tuple[Module, Schedule | None]:
    """A module and its schedule from one XLA dump file (text or serialized proto); bad files
    raise ``TraceInputError``."""
    from parsers.hlo.dump import load_dump
    return load_dump(path)


def find_hlo_dumps(directory: Path) -> list[Path]:
    """The optimized module files of an XLA dump directory (``--xla_dump_to``), in order."""
    from parsers.hlo.dump import find_dumps
    return find_dumps(directory)


def is_hlo_dump_file(path: Path) -> bool:
    """Whether a file is named as an XLA dump file (HLO text, or a serialized proto that is
    not an XSpace) rather than a trace."""
    from parsers.hlo.dump import TEXT_SUFFIXES
    name = path.name.lower()
    return name.endswith(TEXT_SUFFIXES) or (name.endswith(".pb")
                                            and not name.endswith(".xplane.pb"))
