"""Never silent, round four (issue 57): a seeded campaign of inputs that are whole but were
read doubled, empty, in part or refused, and of outputs that replaced what was not a file.

    python benchmarks/never_silent_campaign.py [--seed 57] [--per-case 3] [--code DIR]

Bases are those of ``mutation_campaign.py`` (the two bundled 8-GPU XSpace samples; Kineto,
rocprofv3 JSON, CSV and rocpd, and RPD written from the MI300X sample) plus the bundled TPU
sample. Each case is drawn ``--per-case`` times per base it applies to, its choices (names,
which line, which kernel, where) from the seeded generator:

- ``copy``: the base and a byte-identical renamed copy in one folder (every format);
- ``copy-run``: the copy in a second run folder (XSpace);
- ``wal``: the database's rows committed only in its ``-wal`` file (rocpd, RPD);
- ``hot-journal``: a writer killed mid-transaction, its ``-journal`` beside (rocpd, RPD);
- ``bom``: a UTF-8 byte order mark before the text (Kineto, rocprofv3 JSON and CSV);
- ``surrogate``: a lone ``\\ud800`` in a kernel name (Kineto, rocprofv3 JSON);
- ``leading-field``: an unknown protobuf field before the planes (XSpace, TPU);
- ``line-new-id`` / ``line-same-id``: a device line copied under a new or the same line id
  (XSpace, TPU);
- ``no-xla-ops``: a TPU plane without its ``XLA Ops`` line;
- ``dur-0``: every Kineto kernel with ``dur: 0``; ``events-twice``: ``traceEvents`` twice;
- ``mixed-recorders``: a rendering of the MI300X sample beside the XSpace it came from (the
  same kernels by two profilers: Kineto, rocprofv3 JSON, CSV, rocpd, RPD);
- ``fifo-host``: a FIFO named like a second host's file beside the base (every format);
- outputs (``out-*``, once per output kind): ``export -o``/``--perfetto``, ``report -o``,
  ``critical-path --perfetto`` at a FIFO, a link out of the folder and an existing file.

Inputs are loaded in a worker process (restarted after a crash or a ``--timeout`` stall) and
classified against the base read alone:

- ``error-exit-2``: refused where refusal is the answer (``events-twice``,
  ``mixed-recorders``, ``fifo-host``);
  ``false-refusal``: refused where the file is a whole trace;
- ``clean``: the base's device events, devices and steps, and the warning the case calls for;
- ``doubled`` / ``silent-partial`` / ``silent-empty``: more, fewer or no events (or devices)
  than the base; or the same but without the warning the case calls for (``unsaid``);
- ``traceback``, ``crash``, ``hang``.

Outputs run the CLI in a fresh process (a FIFO opened for writing blocks) and are
``refused`` (exit 2, the path untouched), ``said`` (a file replaced, and said), or
``replaced-non-regular`` / ``followed-link`` / ``unsaid`` / ``hang``.

``--code DIR``: load with the tracelens at DIR (a checkout of the code before, to count
what it did). Writes ``results/never_silent_campaign.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("TL_CODE", ROOT))
sys.path.insert(0, str(CODE))

Case = Callable[[Path, Path, random.Random], Path]  # (base, out dir, rng) -> input path


# ---- bases --------------------------------------------------------------------------------

def make_bases(d: Path) -> dict[str, list[Path]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from mutation_campaign import make_bases as mutation_bases
    bases = mutation_bases(d)
    bases["tpu"] = [ROOT / "sample_traces" / "tpu" / "multi.xplane.pb"]
    return bases


def _text(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _folder_with(base: Path, out: Path, name: str | None = None) -> Path:
    """``out`` holding the base (with its CSV siblings) as ``name``; the file's path."""
    out.mkdir(parents=True)
    if base.name.endswith(".csv"):
        for p in base.parent.iterdir():
            shutil.copy(p, out / p.name)
        return out / base.name
    dst = out / (name or base.name)
    shutil.copy(base, dst)
    return dst


def _rocprof_name(base: Path, pid: int) -> str:
    """A rocprofv3 output name for the base's format (discovery reads those only)."""
    if base.name.endswith(".db"):
        return f"{pid}_results.db"
    if base.name.endswith((".json", ".json.gz")) and b"rocprofiler-sdk-tool" in _text(base)[:4096]:
        return f"{pid}_results.json"
    return base.name


# ---- cases: inputs ------------------------------------------------------------------------

def c_copy(base: Path, out: Path, rng: random.Random) -> Path:
    src = _folder_with(base, out, _rocprof_name(base, 1000 + rng.randrange(1000)))
    if base.name.endswith(".csv"):
        prefix = base.name[: -len("kernel_trace.csv")]
        other = f"{rng.randrange(2000, 3000)}_"
        for p in list(out.iterdir()):
            if p.name.startswith(prefix):
                shutil.copy(p, out / (other + p.name[len(prefix):]))
    else:
        suffix = "".join(src.suffixes[-2:]) if src.name.endswith(".gz") else src.suffix
        name = _rocprof_name(base, 3000 + rng.randrange(1000))
        if name == base.name:
            name = f"copy{rng.randrange(100)}{'.xplane.pb' if '.xplane' in src.name else suffix}"
        shutil.copy(src, out / name)
    return out


def c_copy_run(base: Path, out: Path, rng: random.Random) -> Path:
    for run in ("2026_01_01_00_00_00", f"2026_01_01_00_00_{rng.randrange(1, 60):02d}"):
        _folder_with(base, out / "plugins" / "profile" / run)
    return out


def _wal(base: Path, out: Path, rng: random.Random) -> Path:
    out.mkdir(parents=True)
    live = out / "work" / base.name
    live.parent.mkdir()
    dst = out / _rocprof_name(base, 1)
    con = sqlite3.connect(live)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    src = sqlite3.connect(base)
    src.backup(con)
    src.close()
    shutil.copyfile(live, dst)
    shutil.copyfile(str(live) + "-wal", str(dst) + "-wal")
    con.close()
    shutil.rmtree(live.parent)
    return dst


def c_hot_journal(base: Path, out: Path, rng: random.Random) -> Path:
    dst = _folder_with(base, out, _rocprof_name(base, 1))
    crash = ("import os, sqlite3, sys\n"
             "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
             "con.execute('PRAGMA cache_size=1')\n"
             "con.execute('BEGIN')\n"
             "names = [t for (t,) in con.execute(\"SELECT name FROM sqlite_master WHERE "
             "type='table' AND name NOT LIKE 'sqlite_%'\")]\n"
             f"for t in names[:{rng.randint(3, 40)}]:\n"
             "    con.execute(f'DELETE FROM \"{t}\"')\n"
             "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", crash, str(dst)], check=True)
    return dst


def c_bom(base: Path, out: Path, rng: random.Random) -> Path:
    dst = _folder_with(base, out, _rocprof_name(base, 1))
    targets = list(out.glob("*.csv")) if base.name.endswith(".csv") else [dst]
    for p in targets:
        p.write_bytes(b"\xef\xbb\xbf" + _text(p))
    if dst.name.endswith(".gz"):
        plain = dst.with_name(dst.name[:-3])
        dst.rename(plain)
        return plain
    return dst


def _kernel_names(base: Path) -> list[str]:
    import tracelens
    return sorted(set(tracelens.load(base).events["name"].cast(str).to_list()))


def c_surrogate(base: Path, out: Path, rng: random.Random) -> Path:
    text = _text(base)
    name = rng.choice([n for n in _kernel_names(base) if n.encode() in text]).encode()
    dst = out / _rocprof_name(base, 1).removesuffix(".gz")
    out.mkdir(parents=True)
    dst.write_bytes(text.replace(name, b"\\ud800" + name, rng.randint(1, 3)))
    return dst


def _space(base: Path) -> Any:
    from parsers.xplane_schema import xspace_class
    space = xspace_class()()
    space.ParseFromString(base.read_bytes())
    return space


def _write(out: Path, name: str, data: bytes) -> Path:
    out.mkdir(parents=True)
    (out / name).write_bytes(data)
    return out / name


def c_leading_field(base: Path, out: Path, rng: random.Random) -> Path:
    field = rng.choice([15, 16, 99, 1000])
    tag = (field << 3).to_bytes(1, "little") if field < 16 else bytes(
        [((field << 3) & 0x7F) | 0x80, (field << 3) >> 7])
    return _write(out, base.name, tag + bytes([rng.randrange(1, 127)]) + base.read_bytes())


def _device_planes(space: Any) -> list[Any]:
    return [p for p in space.planes if p.name.startswith(("/device:GPU:", "/device:TPU:"))]


def _line_copy(same_id: bool) -> Case:
    def case(base: Path, out: Path, rng: random.Random) -> Path:
        space = _space(base)
        plane = rng.choice([p for p in _device_planes(space)
                            if any(len(ln.events) for ln in p.lines)])
        lines = [ln for ln in plane.lines if len(ln.events)
                 and (ln.name.startswith("Stream #") or "XLA Ops" in ln.name)]
        line = rng.choice(lines)
        new = plane.lines.add()
        new.CopyFrom(line)
        if not same_id:
            ids = {ln.id for ln in plane.lines}
            new.id = next(i for i in range(rng.randrange(100, 1000), 10**6) if i not in ids)
        return _write(out, base.name, space.SerializeToString())
    case.__name__ = "c_line_same_id" if same_id else "c_line_new_id"
    return case


def c_no_xla_ops(base: Path, out: Path, rng: random.Random) -> Path:
    space = _space(base)
    plane = rng.choice(_device_planes(space))
    keep = [ln for ln in plane.lines if ln.name != "XLA Ops"]
    del plane.lines[:]
    plane.lines.extend(keep)
    return _write(out, base.name, space.SerializeToString())


def c_dur_0(base: Path, out: Path, rng: random.Random) -> Path:
    doc = json.loads(_text(base))
    share = rng.choice([1.0, 1.0, 0.5])
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel" and ev.get("ph") == "X" and rng.random() < share:
            ev["dur"] = 0
    return _write(out, "rank0.json", json.dumps(doc).encode())


def c_events_twice(base: Path, out: Path, rng: random.Random) -> Path:
    text = _text(base).decode().rstrip()
    extra = rng.choice(['"traceEvents": []', '"traceEvents": null', '"traceEvents": [{}]'])
    return _write(out, "rank0.json", (text[:-1] + ", " + extra + "}").encode())


def c_fifo_host(base: Path, out: Path, rng: random.Random) -> Path:
    """The base in ``out/p0/`` and a FIFO named like its file in ``out/p1/``."""
    src = _folder_with(base, out / "p0", _rocprof_name(base, 1))
    (out / "p1").mkdir()
    os.mkfifo(out / "p1" / src.name)
    return out


def c_mixed_recorders(base: Path, out: Path, rng: random.Random) -> Path:
    """The base (a rendering of the MI300X sample) beside the XSpace it was rendered from:
    the same kernels recorded by two profilers."""
    _folder_with(base, out, _rocprof_name(base, 1 + rng.randrange(1000)))
    xspace = ROOT / "sample_traces" / "mi300x_8gpu_llama_step.xplane.pb"
    shutil.copy(xspace, out / xspace.name)
    return out


# case -> (formats it applies to, what a correct reading is: "same" the base's counts with
# the warning code given (None: no warning needed), or "refuse")
CASES: dict[str, tuple[Case, tuple[str, ...], str, str | None]] = {
    "copy": (c_copy, ("xspace", "tpu", "kineto", "rocprof-json", "rocprof-csv", "rocpd",
                      "rpd"), "same", "discover.copies"),
    "copy-run": (c_copy_run, ("xspace", "tpu"), "same", "discover.copies"),
    "wal": (_wal, ("rocpd", "rpd"), "same", None),
    "hot-journal": (c_hot_journal, ("rocpd", "rpd"), "same", None),
    "bom": (c_bom, ("kineto", "rocprof-json", "rocprof-csv"), "same", None),
    "surrogate": (c_surrogate, ("kineto", "rocprof-json"), "same", "read.lone_surrogates"),
    "leading-field": (c_leading_field, ("xspace", "tpu"), "same", None),
    "line-new-id": (_line_copy(False), ("xspace", "tpu"), "same", "xspace.repeated_events"),
    "line-same-id": (_line_copy(True), ("xspace", "tpu"), "same", "xspace.repeated_events"),
    "no-xla-ops": (c_no_xla_ops, ("tpu",), "less", "xspace.tpu_no_ops_line"),
    "dur-0": (c_dur_0, ("kineto",), "same", "kineto.zero_duration"),
    "events-twice": (c_events_twice, ("kineto",), "refuse", None),
    "mixed-recorders": (c_mixed_recorders, ("kineto", "rocprof-json", "rocprof-csv", "rocpd",
                                            "rpd"), "refuse", None),
    "fifo-host": (c_fifo_host, ("xspace", "tpu", "kineto", "rocprof-json", "rocprof-csv",
                                "rocpd", "rpd"), "refuse", None),
}


# ---- loading and classifying ---------------------------------------------------------------

def facts(path: str) -> dict[str, Any]:
    import tracelens
    from tracelens.core.errors import TraceInputError
    try:
        t = tracelens.load(path)
    except TraceInputError as exc:
        return {"status": "error", "detail": str(exc)[:300]}
    except Exception as exc:  # noqa: BLE001 (a traceback is what the campaign looks for)
        return {"status": "traceback", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    return {"status": "ok", "events": t.events.height,
            "devices": t.devices.select("host", "rank", "device").unique().height,
            "steps": t.steps.height, "codes": sorted({n.code for n in t.meta.notices})}


def worker() -> None:
    for line in sys.stdin:
        print(json.dumps(facts(line.strip())), flush=True)


def run_all(paths: list[Path], timeout: float) -> list[dict[str, Any]]:
    """``facts`` of every path in a worker (the ``--code`` tracelens), restarted after a
    crash or a stall."""
    import selectors
    out: list[dict[str, Any]] = []
    proc: subprocess.Popen[str] | None = None
    for path in paths:
        if proc is None:
            proc = subprocess.Popen([sys.executable, __file__, "--worker"], text=True,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, cwd=CODE,
                                    env={**os.environ, "PYTHONPATH": str(CODE),
                                         "TL_CODE": str(CODE)})
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
        if ready:
            out.append({"status": "crash", "detail": f"worker exit {proc.wait()}"})
        else:
            proc.kill()
            proc.wait()
            out.append({"status": "hang", "detail": f"no answer in {timeout:.0f} s"})
        proc = None
    if proc is not None:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait()
    return out


def classify(got: dict[str, Any], base: dict[str, Any], want: str, code: str | None) -> str:
    if got["status"] == "error":
        return "error-exit-2" if want == "refuse" else "false-refusal"
    if got["status"] != "ok":
        return got["status"]
    if want == "refuse":  # read what should have been refused: what did it read?
        return "doubled" if got["events"] > base["events"] else "silent-partial"
    said = code is None or code in got["codes"]
    if got["events"] == 0 and base["events"]:
        return "silent-empty" if not said else "clean"
    if want == "less":  # a part is missing from the file itself: said, or silent
        return "clean" if said else "silent-partial"
    if got["events"] > base["events"] or got["devices"] > base["devices"]:
        return "doubled"
    if got["events"] < base["events"] or got["devices"] < base["devices"] \
            or got["steps"] < base["steps"]:
        return "silent-partial" if not said else "clean"
    return "clean" if said else "unsaid"


# ---- outputs --------------------------------------------------------------------------------

OUTPUTS = {
    "export-o": ("export", "--table", "kernels", "-o", "{out}.csv"),
    "export-perfetto": ("export", "--perfetto", "{out}.json"),
    "report-o": ("report", "-o", "{out}.html"),
    "critical-perfetto": ("critical-path", "--perfetto", "{out}.json"),
}


def run_output(kind: str, target: str, tmp: Path, sample: Path, timeout: float) -> str:
    """One output command at a FIFO, a link out of the folder, or an existing file."""
    d = tmp / f"{kind}-{target}"
    (d / "out").mkdir(parents=True)
    args = [a.replace("{out}", str(d / "out" / "x")) for a in OUTPUTS[kind]]
    path = Path(next(a for a in args if a.startswith(str(d))))
    outside = d / "elsewhere.txt"
    if target == "fifo":
        os.mkfifo(path)
    elif target == "link-out":
        outside.write_text("keep\n")
        path.symlink_to(outside)
    else:
        path.write_text("old\n")
    try:
        res = subprocess.run([sys.executable, "-m", "tracelens.cli", args[0], str(sample),
                              *args[1:]], capture_output=True, text=True, timeout=timeout,
                             cwd=CODE, env={**os.environ, "PYTHONPATH": str(CODE)})
    except subprocess.TimeoutExpired:
        return "hang"
    if target == "fifo":
        if stat.S_ISFIFO(os.lstat(path).st_mode):
            return "refused" if res.returncode == 2 else "unsaid"
        return "replaced-non-regular"
    if target == "link-out":
        if outside.read_text() != "keep\n" or not path.is_symlink():
            return "followed-link" if outside.read_text() != "keep\n" else \
                "replaced-non-regular"
        return "refused" if res.returncode == 2 else "unsaid"
    if res.returncode != 0:
        return "traceback" if "Traceback" in res.stderr else "false-refusal"
    return "said" if "replaced" in res.stderr else "unsaid"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=57)
    ap.add_argument("--per-case", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--code", type=Path, default=None,
                    help="the tracelens checkout to load with (default: this one)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker()
    if args.code is not None:  # the workers and the CLI runs import it
        os.environ["TL_CODE"] = str(args.code.resolve())
        global CODE
        CODE = args.code.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="tl-silent4-"))
    rng = random.Random(args.seed)
    bases = make_bases(tmp / "bases")
    plan: list[tuple[str, Path, str, Path]] = []
    n = 0
    for name, (case, formats, _, _) in CASES.items():
        for fmt in formats:
            for base in bases[fmt]:
                for _ in range(args.per_case):
                    n += 1
                    plan.append((fmt, base, name, case(base, tmp / "cases" / f"{n:04d}", rng)))
    start = time.time()
    flat = [b for fs in bases.values() for b in fs]
    base_facts = dict(zip(map(str, flat), run_all(flat, args.timeout)))
    got = run_all([p for *_, p in plan], args.timeout)
    rows = []
    for (fmt, base, name, _), g in zip(plan, got):
        _, _, want, code = CASES[name]
        rows.append({"format": fmt, "base": base.name, "case": name,
                     "class": classify(g, base_facts[str(base)], want, code),
                     "detail": g.get("detail") or {k: g.get(k) for k in (
                         "events", "devices", "steps")}})
    sample = ROOT / "sample_traces" / "mi300x_8gpu_llama_step.xplane.pb"
    for kind in OUTPUTS:
        for target in ("fifo", "link-out", "file"):
            rows.append({"format": "output", "base": kind, "case": f"out-{target}",
                         "class": run_output(kind, target, tmp / "outputs", sample,
                                             args.timeout), "detail": ""})
    counts = Counter(r["class"] for r in rows)
    by_case = {c: dict(Counter(r["class"] for r in rows if r["case"] == c))
               for c in dict.fromkeys(r["case"] for r in rows)}
    result = {"seed": args.seed, "code": str(CODE), "cases": len(rows),
              "seconds": round(time.time() - start), "counts": dict(sorted(counts.items())),
              "by_case": by_case, "rows": rows}
    res_dir = ROOT / "benchmarks" / "results"
    res_dir.mkdir(exist_ok=True)
    name = "never_silent_campaign.json" if CODE == ROOT else "never_silent_campaign_before.json"
    (res_dir / name).write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(rows)} cases (seed {args.seed}, code {CODE}) in {result['seconds']} s:",
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for c, k in by_case.items():
        print(f"  {c:15s}", ", ".join(f"{a} {b}" for a, b in sorted(k.items())))
    for r in rows:
        if r["class"] not in ("error-exit-2", "clean", "refused", "said"):
            print(f"  {r['class']:20s} {r['format']:13s} {r['case']:14s} {r['base']} "
                  f"{r['detail']}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
