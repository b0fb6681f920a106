"""``summarize`` is short by default (issue 47): about 50 lines on every bundled sample,
starting with the findings; ``--all`` gives every table; warnings and notes go to stderr,
once per job, never to stdout."""

from __future__ import annotations

import re

import pytest

from .conftest import SAMPLES, cli

JOBS = sorted([*SAMPLES.glob("*.xplane.pb"), SAMPLES / "mi355x_2x8gpu_straggler",
               *(SAMPLES / "tpu").glob("*.xplane.pb")])
MAX_LINES = 52  # "about 50"


@pytest.mark.parametrize("path", JOBS, ids=lambda p: p.name)
def test_short_by_default(path) -> None:  # type: ignore[no-untyped-def]
    out = cli("summarize", str(path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) <= MAX_LINES, "\n".join(lines)
    # the headline: three lines, and the peaks used when known; then the findings
    at = next(i for i, line in enumerate(lines) if line.startswith("What to fix first"))
    assert at <= 4 and all(not line.startswith(("1. ", "Devices")) for line in lines[:at])
    assert any(x in lines[at + 1] for x in ("1. ", "nothing found", "what-if(s)"))
    for absent in ("Why idle", "Roofline (", "Per-step timeline", "HLO findings"):
        assert absent not in out.stdout  # detail of --all
    assert "warning" not in out.stdout.lower()


def test_all_gives_every_table() -> None:
    path = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
    out = cli("summarize", str(path), "--all")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("What to fix first")
    for table in ("Per-device timeline", "Why idle", "Categories", "Per-step timeline",
                  "Top kernels", "Collectives", "Roofline"):
        assert table in out.stdout, table
    assert len(out.stdout.splitlines()) > 100


def test_steps_one_row_each_with_their_spread() -> None:
    """The 8-GPU sample's 3 steps are 3 rows (not 24 device × step rows) with the lowest
    and highest busy share across the devices."""
    out = cli("summarize", str(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"))
    rows = [line for line in out.stdout.splitlines()
            if re.match(r"^[012] +8 +6\.000 ", line)]
    assert len(rows) == 3, out.stdout
    assert all(line.split()[1] == "8" for line in rows)  # devices that ran the step
    # each row's busy spread is the lowest, median and highest of the devices' own step
    # timelines in the JSON (the per device × step numbers --all and the JSON keep)
    import json
    import statistics
    doc = json.loads(cli("summarize", str(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"),
                         "--format", "json").stdout)
    for line in rows:
        step = int(line.split()[0])
        busy = sorted(100 * st["timeline"]["busy_ns"] / st["timeline"]["span_ns"]
                      for d in doc["devices"] for st in d["steps"] if st["step"] == step)
        want = f"{statistics.median_low(busy):.1f}% ({busy[0]:.1f}–{busy[-1]:.1f})"
        assert want in line, (line, want)


def test_warnings_and_notes_on_stderr_once() -> None:
    """The MI300X/MI355X memory-bandwidth stat is a fact the tool corrects: a note, on
    stderr, once per job (the 2-host job says it once for both files)."""
    out = cli("summarize", str(SAMPLES / "mi355x_2x8gpu_straggler"))
    assert out.returncode == 0
    assert "memory_bandwidth" not in out.stdout
    notes = [line for line in out.stderr.splitlines() if "memory_bandwidth" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ")
    assert "the same on 2 hosts/files" in notes[0]
    md = cli("summarize", str(SAMPLES / "mi355x_2x8gpu_straggler"), "--format", "markdown")
    assert "memory_bandwidth" not in md.stdout and "memory_bandwidth" in md.stderr
    quiet = cli("summarize", str(SAMPLES / "mi355x_2x8gpu_straggler"), "--quiet")
    assert quiet.stderr == ""


def test_short_markdown_has_the_findings() -> None:
    out = cli("summarize", str(SAMPLES / "mi355x_2x8gpu_straggler"), "--format", "markdown")
    assert out.returncode == 0
    assert "## What to fix first" in out.stdout
    assert "Find why mi355x-node1/GPU3 is late" in out.stdout


@pytest.mark.parametrize("args", [
    ("summarize", "{s}"), ("summarize", "{s}", "--all"), ("collectives", "{s}"),
    ("axes", "{s}"), ("critical-path", "{s}"), ("hlo", "{m}"),
    ("compare", "{m}", "{s}"), ("scaling", "{m}", "{s}")], ids=lambda a: " ".join(a))
@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_stdout_of_every_command_holds_no_warning(args, fmt) -> None:  # type: ignore[no-untyped-def]
    """Issue 47: warnings (and notes) go to stderr, each once; stdout holds the result. On
    the 2-host MI355X job (its memory_bandwidth note) and against the MI300X sample (compare
    and scaling warn that the hardware differs)."""
    paths = {"s": str(SAMPLES / "mi355x_2x8gpu_straggler"),
             "m": str(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")}
    out = cli(*[a.format(**paths) for a in args], "--format", fmt)
    assert out.returncode == 0, out.stderr
    assert "warning" not in out.stdout.lower() and "memory_bandwidth" not in out.stdout
    said = [line for line in out.stderr.splitlines() if line.startswith(("warning:", "note:"))]
    assert len(said) == len(set(said)), said  # each once
    if args[0] in ("compare", "scaling"):
        assert any("different hardware" in line for line in said), out.stderr
