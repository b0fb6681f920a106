"""Warnings are typed notices (code, fields, one template): merged and folded by their code
and fields, never by reading their text back; repeated per host, said once."""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson
import pytest

import tracelens
from parsers.xplane_schema import xspace_class
from tracelens.analyze.summary.build import reduce_summary, summary_partial
from tracelens.analyze.summary.merge import merge_partials, merged_notices
from tracelens.core.model import Notice, TraceMeta
from tracelens.core.notices import CLIPPED, clipped, clipped_total, fold_per_host
from tracelens.results.encode import encode
from tracelens.loading.steps import ORDERED_LAST
from tracelens_dev.writers.xspace import Activity, build_xspace

from .conftest import SAMPLES, SHARED, cli

START = 1_800_000_000_000_000_000


def _dropped(file: str, n: int) -> Notice:
    return Notice.of("xspace.negative_durations", "{file}: dropped {n} events with negative "
                     "duration", file=file, n=n)


def test_a_notice_renders_its_fields_once_and_says_what_it_is_about() -> None:
    n = _dropped("node0.xplane.pb", 3)
    assert n.text == "node0.xplane.pb: dropped 3 events with negative duration"
    assert (n.get("n"), n.get("missing"), n.subject) == (3, None, "node0.xplane.pb")
    assert n.kind == _dropped("node1.xplane.pb", 3).kind != _dropped("node1.xplane.pb", 4).kind
    inner = Notice.of("rocprof.mixed_rccl", "{where}: {n} RCCL kernels", where="process 7", n=2)
    assert inner.subject is None
    said = inner.about("a_results.db")
    assert said.text == "a_results.db: process 7: 2 RCCL kernels"
    assert (said.code, said.subject) == ("rocprof.mixed_rccl", "a_results.db")
    with pytest.raises(ValueError):
        said.about("b_results.db")
    # the subject is the one the text names first
    two = Notice.of("c", "{file}: host {host!r}", host="h", file="f.csv")
    assert (two.text, two.subject) == ("f.csv: host 'h'", "f.csv")


def test_notices_pickle_small_and_equal() -> None:
    meta = TraceMeta(notices=[_dropped(f"node{i}.xplane.pb", i) for i in range(3)])
    back = pickle.loads(pickle.dumps(meta))
    assert back.notices == meta.notices and back.warnings == meta.warnings
    assert len(pickle.dumps(clipped(1_275, 568))) < 300


def test_warn_keeps_each_notice_once_in_order() -> None:
    meta = TraceMeta()
    for n in (_dropped("a.pb", 1), clipped(2, 5), _dropped("a.pb", 1)):
        meta.warn(n)
    assert meta.warnings == ["a.pb: dropped 1 events with negative duration",
                             "clipped 2 same-stream overlaps (largest 5 ns): an in-order stream "
                             "cannot run two activities at once"]
    with pytest.raises(TypeError):
        meta.warn("a sentence")  # type: ignore[arg-type]


def test_fold_names_the_hosts_and_counts_them() -> None:
    alone = Notice.of("align.no_profile_start", "hosts could not be aligned")
    out = fold_per_host([_dropped(f"node{i}.xplane.pb", 3) for i in range(8)] + [alone])
    assert out == ["node0.xplane.pb: dropped 3 events with negative duration (the same on 8 "
                   "hosts/files: node0.xplane.pb, node1.xplane.pb, node2.xplane.pb, "
                   "node3.xplane.pb, ... 4 more)", "hosts could not be aligned"]
    # different counts are different notices; a notice about no host or file stands alone
    assert len(fold_per_host([_dropped("a.pb", 1), _dropped("b.pb", 2)])) == 2
    assert fold_per_host([alone, clipped(1, 2)]) == [alone.text, clipped(1, 2).text]
    # the same words from two codes are two notices
    other = Notice("xspace.other", _dropped("b.pb", 1).template, _dropped("b.pb", 1).fields)
    assert len(fold_per_host([_dropped("a.pb", 1), other])) == 2


def test_the_clipped_count_is_summed_from_fields_not_text() -> None:
    # a clip notice whose words the old parse-back could not read: its fields still count
    odd = Notice(CLIPPED, "{n} overlaps cut, at most {largest_ns} ns",
                 (("n", 7), ("largest_ns", 900)))
    assert clipped_total([clipped(2, 30), odd, _dropped("a.pb", 1)]) == (9, 900)
    merged = merged_notices([[clipped(2, 30)], [clipped(1, 50)]])
    assert merged == (clipped(3, 50),)
    assert clipped_total([]) == (0, 0)


def test_step_notices_come_last_after_the_stage_notices() -> None:
    unmatched = Notice.of("steps.marker_unmatched", "no ROCTx range matches --step-marker "
                          "{pattern!r}", pattern="x")
    share = Notice.of("steps.annotations_share", "the step annotations hold {pct:.1f}%",
                      pct=80.0)
    unaligned = Notice.of("align.no_profile_start", "hosts could not be aligned")
    got = merged_notices([[unmatched, _dropped("a.pb", 1), clipped(1, 9), share],
                          [unmatched, _dropped("b.pb", 2), clipped(2, 4)]], unaligned)
    assert got == (_dropped("a.pb", 1), share, _dropped("b.pb", 2), clipped(3, 9), unaligned,
                   unmatched)
    assert {"steps.marker_unmatched", "steps.marker_overlap"} <= ORDERED_LAST


def _host(path: Path, host: str, reported: list[str], overlaps: int = 0) -> Path:
    """A one-host XSpace whose profiler reported ``reported``, with ``overlaps``
    same-stream overlaps (the i-th of 10 * i ns)."""
    acts = [Activity(0, 1, f"Cijk_gemm{i}.kd", 1_000 + 100 * i, 100 + 10 * (i + 1), {})
            for i in range(overlaps)] + [Activity(0, 1, "Cijk_last.kd", 1_000 + 100 * overlaps,
                                                  50, {})]
    space = xspace_class()()
    space.ParseFromString(build_xspace(acts, host=host, steps=[(0, 900, 2_000)],
                                       profile_start_ns=START))
    space.warnings.extend(reported)
    path.write_bytes(space.SerializeToString())
    return path


def _warnings(files: list[Path], about: str) -> tuple[list[str], list[str]]:
    """The summary's warnings that say ``about`` of the files loaded together, and of their
    per-host partials merged (the engine's reduce)."""
    whole = encode(tracelens.summarize(tracelens.load(files)))["warnings"]
    parts = [summary_partial(tracelens.load([f])) for f in files]
    merged = encode(reduce_summary([merge_partials(parts)]))["warnings"]
    return [w for w in whole if about in w], [w for w in merged if about in w]


def test_a_host_named_inside_another_warning_is_not_folded(tmp_path: Path) -> None:
    """Each host's profiler names the other: two different warnings. Read back with a regex
    over the host and file names, they looked the same and were folded into one that
    claimed both hosts lost contact with beta."""
    files = [_host(tmp_path / "alpha.xplane.pb", "alpha", ["lost contact with beta"]),
             _host(tmp_path / "beta.xplane.pb", "beta", ["lost contact with alpha"])]
    for got in _warnings(files, "profiler reported"):
        assert got == ["alpha.xplane.pb: profiler reported: lost contact with beta",
                       "beta.xplane.pb: profiler reported: lost contact with alpha"]


def test_the_same_warning_on_two_hosts_is_said_once(tmp_path: Path) -> None:
    files = [_host(tmp_path / f"{h}.xplane.pb", h, ["disk full"]) for h in ("alpha", "beta")]
    for got in _warnings(files, "profiler reported"):
        assert got == ["alpha.xplane.pb: profiler reported: disk full (the same on 2 "
                       "hosts/files: alpha.xplane.pb, beta.xplane.pb)"]


def test_two_hosts_clipped_overlaps_sum_as_one_load_counts_them(tmp_path: Path) -> None:
    files = [_host(tmp_path / "alpha.xplane.pb", "alpha", [], overlaps=2),
             _host(tmp_path / "beta.xplane.pb", "beta", [], overlaps=3)]
    whole, merged = _warnings(files, "clipped")
    assert whole == merged == [clipped(5, 30).text]


def test_two_host_sample_says_its_bandwidth_note_once() -> None:
    s = tracelens.summarize(tracelens.load(SAMPLES / "mi355x_2x8gpu_straggler"))
    bw = [w for w in s["notes"] if "memory_bandwidth" in w]  # a fact it corrects: a note
    assert len(bw) == 1 and "(the same on 2 hosts/files: " in bw[0]
    assert not [w for w in s["warnings"] if "memory_bandwidth" in w]


def _inputs() -> list[Path]:
    found = sorted(SAMPLES.glob("*.xplane.pb")) + [SAMPLES / "mi355x_2x8gpu_straggler"]
    traces = SHARED / "traces"
    if traces.exists():
        found += sorted(p for p in traces.rglob("*.gz") if "sampled_128rank" not in str(p))
        found += sorted(traces.rglob("*.xplane.pb"))
        found += [traces / "rocprof" / "docs_snippets" / "kernel_trace.csv"]
    return found


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_every_notice_of_a_real_trace_is_typed_and_carries_its_file(path: Path) -> None:
    """What folds a notice per host is its ``file`` field: a notice whose text opens with
    a file's name carries that name, and none is untyped text."""
    trace = tracelens.load(path, step_marker="no_such_step_marker_x")
    names = {Path(s["path"]).name for s in trace.meta.sources}
    assert trace.meta.notices
    for n in trace.meta.notices:
        assert n.code and n.code != "text" and "." in n.code, n
        opens = next((f for f in names if n.text.startswith(f + ": ")), None)
        assert opens is None or n.get("file") == opens, n
    assert orjson.dumps(trace.meta.warnings) == orjson.dumps([n.text for n in trace.meta.notices])


def test_every_command_says_the_readers_warnings_as_summarize_does(tmp_path: Path) -> None:
    """``collectives``, ``axes`` and ``critical-path`` read the same files as ``summarize``:
    what their readers said (a profiler's own warning, overlaps clipped) is said by each, on
    stderr and in the JSON, folded the same way, per host on the engine and from a trace
    loaded here."""
    files = [_host(tmp_path / "alpha.xplane.pb", "alpha", ["disk full"], overlaps=2),
             _host(tmp_path / "beta.xplane.pb", "beta", ["disk full"], overlaps=3)]
    want = ["alpha.xplane.pb: profiler reported: disk full (the same on 2 hosts/files: "
            "alpha.xplane.pb, beta.xplane.pb)", clipped(5, 30).text]
    summary = tracelens.summarize(tracelens.load(files))["warnings"]
    assert [w for w in summary if w in want] == want
    for command in ("collectives", "axes", "critical-path"):
        res = cli(command, *map(str, files), "--format", "json")
        assert res.returncode == 0, res.stderr
        said = [w for w in orjson.loads(res.stdout)["warnings"] if w in want]
        assert said == want, command
        assert [line[len("warning: "):] for line in res.stderr.splitlines()
                if line[len("warning: "):] in want] == want, command
    here = tracelens.TraceAnalysis(tracelens.load(files))
    for got in (here.collectives, here.axes(), here.critical_path()):
        assert [w for w in got.warnings if w in want] == want
    quiet = cli("collectives", *map(str, files), "--quiet")
    assert quiet.returncode == 0 and "warning:" not in quiet.stderr


@pytest.mark.skipif(not (SHARED / "traces" / "kineto" / "sampled_128rank_job").exists(),
                    reason="../shared (the sampled 128-rank Kineto job) is not here")
def test_collectives_leave_out_what_the_readers_said_of_flops() -> None:
    """How FLOPs were counted bears on the critical path's roofline what-if, not on the
    collectives: rank 1's ATen op without shapes is the critical path's warning only; both
    say each rank's missing message sizes and device properties."""
    job = SHARED / "traces" / "kineto" / "sampled_128rank_job"
    here = tracelens.TraceAnalysis(job)
    flops = [w for w in here.critical_path().warnings if "FLOPs" in w]
    assert len(flops) == 1 and flops[0].startswith("rank-1.json.gz: ")
    coll = here.collectives.warnings
    assert not [w for w in coll if "FLOPs" in w]
    assert [w for w in coll if "deviceProperties" in w] == [
        w for w in here.critical_path().warnings if "deviceProperties" in w] != []
