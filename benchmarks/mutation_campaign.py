"""A seeded mutation campaign over every input format: is any damaged input read silently?

    python benchmarks/mutation_campaign.py [--seed 46] [--per-base 56] [--out DIR]

Bases: the bundled XSpace samples, and writer-made files of every other format from the
bundled MI300X sample (Kineto JSON, rocprofv3 JSON, CSV and rocpd, RPD). Each base gets
``--per-base`` mutants drawn with a fixed seed from three families:

- byte-level: flipped bytes, a cut at a random offset, a zeroed, deleted or repeated range;
- structure-aware: edits that keep the file well-formed (renamed, dropped, repeated or
  stripped XSpace planes, a file cut at a plane boundary; Kineto categories, types and
  repeated events; rocprofv3 records emptied, nulled, repeated, a process repeated; SQLite
  rows deleted or repeated, tables dropped or turned into views; CSV rows repeated or cut,
  a header alone);
- hostile: a 3 GiB sparse file with the format's first bytes, a gzip bomb.

Every mutant is loaded (``tracelens.load``) in a worker process that is restarted when it
dies or stalls, and classified against its base:

- ``error-exit-2``: refused with :class:`TraceInputError` (one line, exit 2 on the CLI);
- ``clean``: read, and it either reads what the file holds or says (a warning that the
  base does not give) why it reads less;
- ``silent-partial``: read, fewer device events than the file holds (or distinct devices
  than it has device planes, or than the base), no new warning;
- ``silent-empty``: read, no device event, no new warning;
- ``doubled``: read, more device events than the file holds distinct records (a record
  counted twice), whatever the warnings;
- ``traceback``: any other exception; ``crash``: the worker died (a signal, an abort);
  ``hang``: no answer in ``--timeout`` seconds.

Writes ``results/mutation_campaign.json`` (every mutant: base, mutation, class, detail) and
prints the counts per class and format.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPARSE = 3 << 30
Mutation = Callable[[Path, Path, random.Random], Path]  # (base, out dir, rng) -> mutant


# ---- bases --------------------------------------------------------------------------------

def make_bases(d: Path) -> dict[str, list[Path]]:
    """Per format, the files mutated: bundled samples and writer-made files."""
    import tracelens
    from tracelens_dev.writers import kineto
    from tracelens_dev.writers.rocprof import write_csv, write_json, write_rocpd, write_rpd

    samples = ROOT / "sample_traces"
    src = tracelens.load(samples / "mi300x_8gpu_llama_step.xplane.pb")
    csv = [p for p in write_csv(src, d / "csv") if p.name.endswith("_kernel_trace.csv")]
    return {
        "xspace": [samples / "h100_8gpu_moe_ddp.xplane.pb",
                   samples / "mi300x_8gpu_llama_step.xplane.pb"],
        "kineto": kineto.write(src, d / "kineto"),
        "rocprof-json": write_json(src, d / "json" / "x.json"),
        "rocprof-csv": csv,
        "rocpd": write_rocpd(src, d / "rocpd" / "x.db"),
        "rpd": write_rpd(src, d / "rpd" / "trace.rpd"),
    }


def _place(base: Path, out: Path, data: bytes | None = None) -> Path:
    """A fresh folder for a mutant of ``base`` (a CSV keeps its sibling tables)."""
    out.mkdir(parents=True)
    if base.name.endswith(".csv"):
        for sib in base.parent.iterdir():
            shutil.copy(sib, out / sib.name)
    path = out / base.name
    if data is not None:
        path.write_bytes(data)
    elif not path.exists():
        shutil.copy(base, path)
    return path


# ---- byte-level ---------------------------------------------------------------------------

def flip(base: Path, out: Path, rng: random.Random) -> Path:
    raw = bytearray(base.read_bytes())
    for _ in range(rng.randint(1, 16)):
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return _place(base, out, bytes(raw))


def cut(base: Path, out: Path, rng: random.Random) -> Path:
    raw = base.read_bytes()
    return _place(base, out, raw[:rng.randrange(1, len(raw))])


def zero_range(base: Path, out: Path, rng: random.Random) -> Path:
    raw = bytearray(base.read_bytes())
    at = rng.randrange(len(raw))
    n = rng.randint(1, 4096)
    raw[at:at + n] = bytes(len(raw[at:at + n]))
    return _place(base, out, bytes(raw))


def delete_range(base: Path, out: Path, rng: random.Random) -> Path:
    raw = base.read_bytes()
    at = rng.randrange(len(raw))
    return _place(base, out, raw[:at] + raw[at + rng.randint(1, 4096):])


def repeat_range(base: Path, out: Path, rng: random.Random) -> Path:
    raw = base.read_bytes()
    at = rng.randrange(len(raw))
    return _place(base, out, raw[:at] + raw[at:at + rng.randint(1, 4096)] + raw[at:])


BYTES = [flip, cut, zero_range, delete_range, repeat_range]


# ---- hostile ------------------------------------------------------------------------------

def sparse(base: Path, out: Path, rng: random.Random) -> Path:
    """The base's first bytes, then holes to 3 GiB (no disk used)."""
    path = _place(base, out, base.read_bytes()[:rng.choice([1, 64, 4096])])
    with open(path, "r+b") as fh:
        fh.truncate(SPARSE)
    return path


def bomb(base: Path, out: Path, rng: random.Random) -> Path:
    """The base's first bytes gzipped with 256 MiB of its last byte's kind of filler."""
    import zlib
    head = base.read_bytes()[:4096]
    fill = b" " if base.suffix in (".json", ".csv") else b"\x00"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(head)] + [z.compress(fill * (1 << 20)) for _ in range(256)]
    path = _place(base, out, b"".join(parts) + z.flush())
    return path.rename(path.with_name(path.name + ".gz"))


HOSTILE = [sparse, bomb]


# ---- structure-aware: XSpace --------------------------------------------------------------

def _space(base: Path) -> Any:
    from parsers.xplane_schema import xspace_class
    space = xspace_class()()
    space.ParseFromString(base.read_bytes())
    return space


def _write_space(base: Path, out: Path, space: Any) -> Path:
    return _place(base, out, space.SerializeToString())


def _gpu(space: Any) -> list[Any]:
    return [p for p in space.planes if p.name.startswith("/device:GPU:")]


def xs_same_name(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    name = rng.choice(_gpu(space)).name
    for p in rng.sample(_gpu(space), rng.randint(2, len(_gpu(space)))):
        p.name = name
    return _write_space(base, out, space)


def xs_empty_names(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    for p in rng.sample(_gpu(space), rng.randint(1, len(_gpu(space)))):
        p.name = ""
    return _write_space(base, out, space)


def xs_no_stat_metadata(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    for p in space.planes:
        if rng.random() < 0.7:
            p.ClearField("stat_metadata")
    return _write_space(base, out, space)


def xs_cut_at_plane(base: Path, out: Path, rng: random.Random) -> Path:
    from google.protobuf.internal.decoder import _DecodeVarint
    raw = base.read_bytes()
    ends, at = [], 0
    while at < len(raw):
        _, at = _DecodeVarint(raw, at)
        n, at = _DecodeVarint(raw, at)
        at += n
        ends.append(at)
    return _place(base, out, raw[:rng.choice(ends[1:-1])])


def xs_drop_planes(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    keep = [p for p in space.planes if rng.random() < 0.6 or not p.name.startswith("/device")]
    del space.planes[:]
    space.planes.extend(keep)
    return _write_space(base, out, space)


def xs_repeat_plane(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    space.planes.add().CopyFrom(copy.deepcopy(rng.choice(_gpu(space))))
    return _write_space(base, out, space)


def xs_rename_lines(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    for p in _gpu(space):
        for line in p.lines:
            if rng.random() < 0.5:
                line.name = rng.choice(["", "stream 1", "Stream #x", "Memcpy"])
    return _write_space(base, out, space)


def xs_tpu(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    for p in _gpu(space):
        p.name = p.name.replace("GPU", rng.choice(["TPU", "gpu", "XPU"]))
    return _write_space(base, out, space)


# Mutations whose damage a count of the mutant's own records cannot see (the planes a cut
# file lost, the stats without names, devices merged or unplaced): measured against the base.
AGAINST_BASE = {"xs_cut_at_plane", "xs_no_stat_metadata", "xs_same_name", "xs_empty_names"}
# Notices that repair what was read, not account for what was not (they do not excuse a loss).
REPAIRS = {"load.clipped"}

XSPACE = [xs_same_name, xs_empty_names, xs_no_stat_metadata, xs_cut_at_plane, xs_drop_planes,
          xs_repeat_plane, xs_rename_lines, xs_tpu]


# ---- structure-aware: Kineto --------------------------------------------------------------

def _json_edit(edit: Callable[[Any, random.Random], Any]) -> Mutation:
    def mutation(base: Path, out: Path, rng: random.Random) -> Path:
        doc = json.loads(base.read_text())
        doc = edit(doc, rng) or doc
        return _place(base, out, json.dumps(doc).encode())
    mutation.__name__ = edit.__name__
    return mutation


def _kernels(doc: Any) -> list[Any]:
    return [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]


def kin_recase(doc: Any, rng: random.Random) -> None:
    for e in rng.sample(_kernels(doc), 14):
        e["cat"] = rng.choice(["KERNEL", "Kernel ", "kernels", "gpu_kernel"])


def kin_no_cat(doc: Any, rng: random.Random) -> None:
    for e in rng.sample(_kernels(doc), 14):
        del e["cat"]


def kin_types(doc: Any, rng: random.Random) -> None:
    for e in rng.sample(_kernels(doc), 20):
        key = rng.choice(["ts", "dur", "name", "args"])
        e[key] = rng.choice(["12", None, [], {}, 1.5, True])


def kin_repeat(doc: Any, rng: random.Random) -> None:
    evs = doc["traceEvents"]
    at = rng.randrange(len(evs))
    evs[at:at] = copy.deepcopy(evs[at:at + rng.randint(1, 200)])


def kin_twice(doc: Any, rng: random.Random) -> None:
    doc["traceEvents"] = doc["traceEvents"] + copy.deepcopy(doc["traceEvents"])


def kin_no_kernels(doc: Any, rng: random.Random) -> None:
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "kernel"]


def kin_null(doc: Any, rng: random.Random) -> None:
    doc[rng.choice(["traceEvents", "deviceProperties", "distributedInfo"])] = rng.choice(
        [None, [], {}, "x"])


KINETO = [_json_edit(f) for f in (kin_recase, kin_no_cat, kin_types, kin_repeat, kin_twice,
                                  kin_no_kernels, kin_null)]


# ---- structure-aware: rocprofv3 JSON ------------------------------------------------------

def _buf(doc: Any) -> Any:
    return doc["rocprofiler-sdk-tool"][0]["buffer_records"]


def rj_dispatch_value(doc: Any, rng: random.Random) -> None:
    _buf(doc)["kernel_dispatch"] = rng.choice([[], None, {}, "x", 0])


def rj_repeat_records(doc: Any, rng: random.Random) -> None:
    recs = _buf(doc)["kernel_dispatch"]
    at = rng.randrange(len(recs))
    recs[at:at] = copy.deepcopy(recs[at:at + rng.randint(1, 100)])


def rj_repeat_process(doc: Any, rng: random.Random) -> None:
    procs = doc["rocprofiler-sdk-tool"]
    procs.append(copy.deepcopy(procs[0]))


def rj_drop_records(doc: Any, rng: random.Random) -> None:
    recs = _buf(doc)["kernel_dispatch"]
    del recs[rng.randrange(len(recs)):]


def rj_types(doc: Any, rng: random.Random) -> None:
    for r in rng.sample(_buf(doc)["kernel_dispatch"], 20):
        key = rng.choice(["start_timestamp", "end_timestamp", "dispatch_info", "thread_id"])
        r[key] = rng.choice(["12", None, [], {}, -1, True])


def rj_no_agents(doc: Any, rng: random.Random) -> None:
    doc["rocprofiler-sdk-tool"][0][rng.choice(["agents", "strings", "kernel_symbols"])] = \
        rng.choice([[], None, {}])


ROCJSON = [_json_edit(f) for f in (rj_dispatch_value, rj_repeat_records, rj_repeat_process,
                                   rj_drop_records, rj_types, rj_no_agents)]


# ---- structure-aware: SQLite (rocpd, RPD) -------------------------------------------------

def _sql_edit(edit: Callable[[sqlite3.Connection, random.Random], None]) -> Mutation:
    def mutation(base: Path, out: Path, rng: random.Random) -> Path:
        path = _place(base, out)
        con = sqlite3.connect(path)
        edit(con, rng)
        con.commit()
        con.close()
        return path
    mutation.__name__ = edit.__name__
    return mutation


def _tables(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                      "AND name NOT LIKE 'sqlite_%'")]


def _device_table(con: sqlite3.Connection) -> str:
    names = _tables(con)
    return next((t for t in names if t.startswith("rocpd_kernel_dispatch")), "rocpd_op")


def _cols(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def db_empty(con: sqlite3.Connection, rng: random.Random) -> None:
    con.execute(f'DELETE FROM "{_device_table(con)}"')


def db_half(con: sqlite3.Connection, rng: random.Random) -> None:
    t = _device_table(con)
    con.execute(f'DELETE FROM "{t}" WHERE id % 2 = {rng.randint(0, 1)}')


def db_repeat(con: sqlite3.Connection, rng: random.Random) -> None:
    t = _device_table(con)
    cols = ", ".join(f'"{c}"' for c in _cols(con, t) if c != "id")
    con.execute(f'INSERT INTO "{t}" ({cols}) SELECT {cols} FROM "{t}" '
                f"LIMIT {rng.randint(1, 500)}")


def db_drop_table(con: sqlite3.Connection, rng: random.Random) -> None:
    con.execute(f'DROP TABLE "{rng.choice(_tables(con))}"')


def db_view(con: sqlite3.Connection, rng: random.Random) -> None:
    t = rng.choice([_device_table(con)] + _tables(con))
    con.execute(f'ALTER TABLE "{t}" RENAME TO "{t}_rows"')
    con.execute(f'CREATE VIEW "{t}" AS SELECT * FROM "{t}_rows"')


def db_text(con: sqlite3.Connection, rng: random.Random) -> None:
    t = _device_table(con)
    col = rng.choice([c for c in _cols(con, t) if c != "id"])
    con.execute(f'UPDATE "{t}" SET "{col}" = \'x\' WHERE id % 7 = 0')


def db_backwards(con: sqlite3.Connection, rng: random.Random) -> None:
    t = _device_table(con)
    con.execute(f'UPDATE "{t}" SET "end" = start - 5 WHERE id % 5 = 0')


SQLITE = [_sql_edit(f) for f in (db_empty, db_half, db_repeat, db_drop_table, db_view,
                                 db_text, db_backwards)]


# ---- structure-aware: CSV -----------------------------------------------------------------

def _csv_edit(edit: Callable[[list[str], random.Random], list[str]]) -> Mutation:
    def mutation(base: Path, out: Path, rng: random.Random) -> Path:
        path = _place(base, out)
        path.write_text("".join(edit(path.read_text().splitlines(keepends=True), rng)))
        return path
    mutation.__name__ = edit.__name__
    return mutation


def csv_header_only(lines: list[str], rng: random.Random) -> list[str]:
    return lines[:1]


def csv_repeat(lines: list[str], rng: random.Random) -> list[str]:
    at = rng.randrange(1, len(lines))
    return lines[:at] + lines[at:at + rng.randint(1, 200)] + lines[at:]


def csv_twice(lines: list[str], rng: random.Random) -> list[str]:
    return lines + lines[1:]


def csv_drop_rows(lines: list[str], rng: random.Random) -> list[str]:
    return lines[:rng.randrange(1, len(lines))]


def csv_drop_column(lines: list[str], rng: random.Random) -> list[str]:
    import csv
    import io
    rows = list(csv.reader(io.StringIO("".join(lines))))
    k = rng.randrange(len(rows[0]))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([r[:k] + r[k + 1:] for r in rows])
    return [buf.getvalue()]


def csv_shuffle(lines: list[str], rng: random.Random) -> list[str]:
    body = lines[1:]
    rng.shuffle(body)
    return lines[:1] + body


CSV = [_csv_edit(f) for f in (csv_header_only, csv_repeat, csv_twice, csv_drop_rows,
                              csv_drop_column, csv_shuffle)]

STRUCTURE = {"xspace": XSPACE, "kineto": KINETO, "rocprof-json": ROCJSON,
             "rocprof-csv": CSV, "rocpd": SQLITE, "rpd": SQLITE}


# ---- loading and classifying ---------------------------------------------------------------

def facts(path: str) -> dict[str, Any]:
    """What loading ``path`` gives: refused (its message), an exception, or counts; and
    what the file holds, counted without tracelens where it can be (:func:`held`)."""
    import tracelens
    from tracelens.core.errors import TraceInputError
    try:
        holds = held(Path(path))
    except Exception:  # noqa: BLE001 (a file the independent count cannot parse)
        holds = None
    try:
        t = tracelens.load(path)
    except TraceInputError as exc:
        return {"status": "error", "detail": str(exc)[:300]}
    except Exception as exc:  # noqa: BLE001 (a traceback is what the campaign looks for)
        return {"status": "traceback", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    devices = t.devices.select("host", "rank", "device").unique().height  # distinct ones
    return {"status": "ok", "events": t.events.height, "devices": devices,
            "steps": t.steps.height,
            "held": holds, "codes": sorted({n.code for n in t.meta.notices}),
            "warnings": [w[:200] for w in t.meta.warnings]}


def _open_text(path: Path) -> str:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


def held(path: Path) -> dict[str, int] | None:
    """The device records the file holds and how many of them are distinct (a record
    written twice counts once), by its own format's rules, without tracelens: Kineto
    complete events of a device category in any case; rocprofv3 JSON dispatches and copies
    (a repeated process's records are repeats); CSV rows of the kernel and copy tables;
    rocpd dispatch and copy rows, RPD kernel and copy ops (distinct: all but the row id);
    XSpace events on the ``Stream #`` lines of every plane, whatever its name, and the planes
    holding them. None: the file is not readable that way (then its base is the yardstick)."""
    name = path.name.lower()
    if name.endswith((".json", ".json.gz")):
        doc = json.loads(_open_text(path))
        if "rocprofiler-sdk-tool" in doc:
            recs = []
            for p in doc["rocprofiler-sdk-tool"]:
                buf = p.get("buffer_records") or {}
                for key in ("kernel_dispatch", "memory_copy"):
                    if isinstance(buf.get(key), list):
                        recs += [json.dumps(r, sort_keys=True) for r in buf[key]]
            return {"records": len(recs), "distinct": len(set(recs))}
        evs = [json.dumps(e, sort_keys=True) for e in doc["traceEvents"]
               if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("cat"), str)
               and e["cat"].strip().lower() in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy",
                                                 "memset")]
        return {"records": len(evs), "distinct": len(set(evs))}
    if name.endswith(".csv"):
        import csv
        rows: list[tuple[str, ...]] = []
        for f in [path] + [path.with_name(path.name.replace("kernel_trace", "memory_copy_trace"))
                           ] * ("kernel_trace" in path.name):
            if f.exists():
                table = list(csv.reader(f.read_text().splitlines()))
                rows += [tuple(r) for r in table[1:] if len(r) == len(table[0])]
        return {"records": len(rows), "distinct": len(set(rows))}
    if name.endswith((".db", ".rpd")):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master "
                                               "WHERE type = 'table'")}
            where, tables = "", [t for t in names if t.startswith(("rocpd_kernel_dispatch",
                                                                    "rocpd_memory_copy"))]
            if not tables and "rocpd_op" in names:
                tables = ["rocpd_op"]
                where = (" WHERE opType_id IN (SELECT id FROM rocpd_string WHERE string IN "
                         "('KernelExecution', 'Task') OR string LIKE 'Copy%')")
            n = d = 0
            for t in tables:
                cols = ", ".join(f'"{r[1]}"' for r in con.execute(f'PRAGMA table_info("{t}")')
                                 if r[1] != "id")
                n += con.execute(f'SELECT COUNT(*) FROM "{t}"{where}').fetchone()[0]
                d += con.execute(f'SELECT COUNT(*) FROM (SELECT DISTINCT {cols} FROM "{t}"'
                                 f"{where})").fetchone()[0]
            return {"records": n, "distinct": d}
        finally:
            con.close()
    if name.endswith(".xplane.pb"):
        import re
        from parsers.xplane_schema import xspace_class
        space = xspace_class()()
        space.ParseFromString(path.read_bytes())
        stream = re.compile(r"^Stream #\d+")
        counts = [sum(len(line.events) for line in p.lines if stream.match(line.name))
                  for p in space.planes]
        return {"records": sum(counts), "distinct": sum(counts),
                "planes": sum(1 for c in counts if c)}
    return None


def worker() -> None:
    """Read paths from stdin, one a line; answer each with a JSON line on stdout."""
    for line in sys.stdin:
        print(json.dumps(facts(line.strip())), flush=True)


def run_all(paths: list[Path], timeout: float) -> list[dict[str, Any]]:
    """``facts`` of every path, in a worker process restarted after a crash or a hang."""
    out: list[dict[str, Any]] = []
    proc: subprocess.Popen[str] | None = None
    import selectors
    for path in paths:
        if proc is None:
            proc = subprocess.Popen([sys.executable, __file__, "--worker"], text=True,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, cwd=ROOT,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{path}\n")
        proc.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        line = proc.stdout.readline() if ready else ""
        if line:
            out.append(json.loads(line))
            continue
        if ready:  # end of file: the worker died
            rc = proc.wait()
            out.append({"status": "crash", "detail": f"worker exit {rc}"})
        else:
            proc.kill()
            proc.wait()
            out.append({"status": "hang", "detail": f"no answer in {timeout:.0f} s"})
        proc = None
    if proc is not None:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait()
    return out


def classify(got: dict[str, Any], base: dict[str, Any], mutation: str = "") -> str:
    """The mutant's class (see the module doc): its reading measured against what it holds
    (:func:`held`) where that is known, else (and for :data:`AGAINST_BASE`) against its
    base's reading: events, distinct devices and steps."""
    if got["status"] == "error":
        return "error-exit-2"
    if got["status"] != "ok":
        return got["status"]
    new = set(got["codes"]) - set(base["codes"]) - REPAIRS
    holds = None if mutation in AGAINST_BASE else got.get("held")
    if holds is None and not new and (got["events"] < base["events"] or got["steps"] <
                                      base["steps"] or got["devices"] < base["devices"]):
        return "silent-empty" if got["events"] == 0 else "silent-partial"
    most = holds["distinct"] if holds else base["events"]
    if got["events"] > most:
        return "doubled"
    if new:
        return "clean"
    if got["events"] == 0:  # nothing read and nothing said, whatever the file holds
        return "silent-empty"
    planes = holds.get("planes", base["devices"]) if holds else base["devices"]
    if got["events"] < most or got["devices"] < min(planes, base["devices"]):
        return "silent-partial"
    return "clean"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--per-base", type=int, default=56)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=None, help="keep the mutants here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker()
    tmp = Path(tempfile.mkdtemp(prefix="tl-mutants-")) if args.out is None else args.out
    tmp.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    bases = make_bases(tmp / "bases")
    plan: list[tuple[str, Path, str, Path]] = []  # format, base, mutation, mutant
    n = 0
    for fmt, files in bases.items():
        for base in files:
            # every base gets every family: even draws structure-aware (each of its format's
            # mutations in turn), odd ones byte-level, every eighth hostile; seeded draws
            for i in range(args.per_base):
                if i % 2 == 0:
                    mutation = STRUCTURE[fmt][i // 2 % len(STRUCTURE[fmt])]
                else:
                    family = HOSTILE if i % 8 == 7 else BYTES
                    mutation = family[rng.randrange(len(family))]
                n += 1
                mutant = mutation(base, tmp / "mutants" / f"{n:04d}", rng)
                plan.append((fmt, base, mutation.__name__, mutant))
    start = time.time()
    base_facts = dict(zip([str(b) for fs in bases.values() for b in fs],
                          run_all([b for fs in bases.values() for b in fs], args.timeout)))
    got = run_all([m for *_, m in plan], args.timeout)
    rows = []
    for (fmt, base, name, mutant), g in zip(plan, got):
        rows.append({"format": fmt, "base": base.name, "mutation": name,
                     "mutant": str(mutant.relative_to(tmp)),
                     "class": classify(g, base_facts[str(base)], name),
                     "detail": g.get("detail") or {k: g.get(k) for k in (
                         "events", "devices", "steps", "held")}})
    counts = Counter(r["class"] for r in rows)
    by_format = {fmt: dict(Counter(r["class"] for r in rows if r["format"] == fmt))
                 for fmt in bases}
    result = {"seed": args.seed, "mutants": len(rows), "seconds": round(time.time() - start),
              "counts": dict(sorted(counts.items())), "by_format": by_format, "rows": rows}
    res_dir = ROOT / "benchmarks" / "results"
    res_dir.mkdir(exist_ok=True)
    (res_dir / "mutation_campaign.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(rows)} mutants (seed {args.seed}) in {result['seconds']} s:",
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for fmt, c in by_format.items():
        print(f"  {fmt:13s}", ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    for r in rows:
        if r["class"] not in ("error-exit-2", "clean"):
            print(f"  {r['class']:15s} {r['format']:13s} {r['mutation']:20s} {r['mutant']} "
                  f"{r['detail']}")
    if args.out is None:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
