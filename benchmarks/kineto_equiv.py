"""Old and new Kineto reader, same output: every frame and warning compared, file by file.

    python benchmarks/kineto_equiv.py --before DIR [FILE ...]

``DIR`` is a checkout of an earlier commit (``git worktree add DIR main --detach``). Each
tree's ``parsers.kineto.read`` runs in a fresh process (``PYTHONPATH`` set to the tree) on
every file (default: every Kineto file under ``../shared/traces/kineto`` and the synthetic
``bench_kineto.py`` file when it is cached) and pickles what it returned: the four frames,
the warnings (and, where the tree has them, the typed notices), the shape facts, the format
facts, the rank and hosts, or the one-line error. Both trees must have the same model.
The two are compared with ``polars.testing.assert_frame_equal`` (exact: no tolerance) and
``==``; exit 1 on any difference. A speed change must leave this silent.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT.parent / "shared" / "traces" / "kineto"
FRAMES = ("events", "host_events", "steps", "devices", "shapes_kernels")


def dump(paths: list[Path], out: Path) -> None:
    """In the tree on ``sys.path``: read each file and pickle what the reader gave."""
    import dataclasses

    from parsers import kineto
    from tracelens.core.errors import TraceInputError
    for i, path in enumerate(paths):
        try:
            tr = kineto.read(path)
        except TraceInputError as exc:
            got: dict[str, Any] = {"error": str(exc)}
        else:
            m = tr.meta
            # the shape facts: TraceMeta.shapes, or (later trees) a ShapeFacts format fact
            facts = [f for f in m.format_facts if not hasattr(f, "shapes")]
            shapes = getattr(m, "shapes", None) or next(
                (f.shapes for f in m.format_facts if hasattr(f, "shapes")), None)
            got = {"events": tr.events, "host_events": tr.host_events, "steps": tr.steps,
                   "devices": tr.devices, "warnings": list(m.warnings),
                   "notices": [(n.code, n.fields) for n in getattr(m, "notices", [])],
                   "shapes_ops": shapes.ops if shapes else None,
                   "shapes_kernels": shapes.kernels if shapes else None,
                   "shapes_notes_at": shapes.notes_at if shapes else None,
                   "format_facts": [dataclasses.asdict(f) for f in facts],
                   "member": dataclasses.asdict(m.member) if m.member else None,
                   "hosts": {k: dataclasses.asdict(v) for k, v in m.hosts.items()},
                   "sources": m.sources}
        (out / f"{i}.pkl").write_bytes(pickle.dumps(got))


def _read_in(tree: Path, paths: list[Path], out: Path) -> None:
    out.mkdir()
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "import kineto_equiv as k; k.dump([Path(p) for p in sys.argv[3:]], Path(sys.argv[2]))")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", code, str(ROOT / "benchmarks"), str(out),
                    *map(str, paths)], env=env, check=True, cwd=tree)


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two dumps of one file (empty: identical)."""
    from polars.testing import assert_frame_equal
    if set(old) != set(new):
        return [f"keys {sorted(old)} != {sorted(new)}"]
    diffs = []
    for key in old:
        a, b = old[key], new[key]
        if key in FRAMES and a is not None and b is not None:
            try:
                assert_frame_equal(a, b, check_exact=True)
            except AssertionError as exc:
                diffs.append(f"{key}: {str(exc).splitlines()[0]}")
        elif a != b:
            diffs.append(f"{key}: {str(a)[:200]} != {str(b)[:200]}")
    return diffs


def default_files() -> list[Path]:
    files = sorted(p for p in KINETO.rglob("*.json*") if p.is_file())
    synth = Path(tempfile.gettempdir()) / "tracelens_bench_kineto_a100_nccl_2rank_rank0_x16.json"
    return files + ([synth] if synth.exists() else [])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    files = args.files or default_files()
    with tempfile.TemporaryDirectory() as d:
        _read_in(args.before.resolve(), files, Path(d) / "old")
        _read_in(ROOT, files, Path(d) / "new")
        bad = 0
        for i, path in enumerate(files):
            old = pickle.loads((Path(d) / "old" / f"{i}.pkl").read_bytes())
            new = pickle.loads((Path(d) / "new" / f"{i}.pkl").read_bytes())
            diffs = compare(old, new)
            what = "error" if "error" in new else f"{new['events'].height} events"
            print(f"{'DIFFERS' if diffs else 'same   '} {path} ({what})")
            for line in diffs:
                print(f"    {line}")
            bad += bool(diffs)
    print(f"{len(files) - bad} of {len(files)} files identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
