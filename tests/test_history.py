"""Run history (issue 29): the store, the records, detection on synthetic series and the
``tracelens history`` commands.

The series are written by our XSpace writer: one GPU, four steps of a GEMM, an attention
kernel, an add fusion and an all-reduce partly hidden behind the GEMM; every kernel's
duration jittered by up to ±1% per run (seeded), and a planted slowdown of the GEMM alone.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, cli
from tracelens.history import detect
from tracelens.history.record import hash_inputs, record_run
from tracelens.history.store import SCHEMA_VERSION, open_store
from tracelens.results.history import RunRecord
from tracelens_dev.writers.xspace import AMD_MI300X_STATS, Activity, build_xspace

GEMM, ATTN, ADD, AR = 40_000, 20_000, 10_000, 12_000


def write_run(path: Path, seed: int, gemm_scale: float = 1.0, devices: int = 1) -> Path:
    """One run's trace (module doc); ``gemm_scale`` stretches the GEMM (the planted change)."""
    rng = random.Random(seed)

    def j(ns: float) -> int:
        return int(ns * (1 + rng.uniform(-0.01, 0.01)))

    acts, steps, t0 = [], [], 0
    for s in range(4):  # steps back to back: a slower kernel makes a longer step
        end = t0
        for d in range(devices):
            g, a, e, r = j(GEMM * gemm_scale), j(ATTN), j(ADD), j(AR)
            t = t0 + 1_000
            acts.append(Activity(d, 1, "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", t, g,
                                 {"hlo_op": "dot.1"}))
            acts.append(Activity(d, 1, "fmha_fwd_d128_bf16", t + g, a,
                                 {"hlo_op": "custom-call.2"}))
            acts.append(Activity(d, 1, "loop_add_fusion.kd", t + g + a, e,
                                 {"hlo_op": "loop_add_fusion"}))
            # half hidden behind the add fusion, half exposed
            acts.append(Activity(d, 2, "ncclDevKernel_Generic_4(x)", t + g + a + e // 2, r,
                                 {"hlo_op": "all-reduce-start.1"}))
            end = max(end, t + g + a + e // 2 + r + 2_000)
        steps.append((s, t0, end))
        t0 = end
    path.write_bytes(build_xspace(acts, steps=steps,
                                  device_stats={d: AMD_MI300X_STATS for d in range(devices)}))
    return path


def record(path: Path, label: str, tags: dict[str, str] | None = None,
           at: str | None = None) -> RunRecord:
    inputs, ident = hash_inputs([path], None, ())
    n = int(label.rsplit("-", 1)[-1]) if label[-1].isdigit() else 0
    return record_run([path], label, tags or {"model": "toy"},
                      at or f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000000Z", inputs, ident)


def series(tmp: Path, scales: list[float], tags: dict[str, str] | None = None,
           devices: int = 1) -> list[RunRecord]:
    """Runs ``run-0``, ``run-1``, ... with the GEMM stretched by ``scales[i]``."""
    return [record(write_run(tmp / f"r{i}_{devices}.xplane.pb", seed=i, gemm_scale=s,
                             devices=devices), f"run-{i}", tags)
            for i, s in enumerate(scales)]


def test_planted_gemm_slowdown_is_found_at_its_run_and_jitter_is_not(tmp_path: Path) -> None:
    runs = series(tmp_path, [1.0] * 8 + [1.25])
    for i in range(1, 8):  # jitter only: never flagged, whatever the prefix
        assert detect.check(runs[:i + 1]).regressions == (), i
    res = detect.check(runs)
    (reg,) = res.regressions
    assert reg.label == "run-8" and reg.first_label == "run-8"
    assert [c.component for c in reg.causes] == ["compute:gemm"]
    base = next(r for r in runs if r.label == reg.baseline_label)
    # the cause is the exact component split: the GEMM's growth, as the records hold it
    gemm = runs[8].components["compute:gemm"] - base.components["compute:gemm"]
    assert reg.causes[0].delta_ns == pytest.approx(gemm)
    assert 9_000 < gemm < 11_000  # +25% of a 40 us GEMM, averaged over the four steps
    assert reg.step_ns - reg.baseline_step_ns == pytest.approx(
        sum(runs[8].components.values()) - sum(base.components.values()))
    assert [v.status for v in res.series] == ["regressed"]
    assert [p.regression for p in res.runs] == [False] * 8 + [True]


def test_a_change_two_runs_earlier_is_found_as_the_change_point(tmp_path: Path) -> None:
    runs = series(tmp_path, [1.0] * 8 + [1.25] * 3)
    (reg,) = detect.check(runs).regressions
    assert reg.label == "run-10" and reg.first_label == "run-8"
    assert int(reg.baseline_label.split("-")[1]) < 8  # the baseline is before the shift
    assert [c.component for c in reg.causes] == ["compute:gemm"]
    # run by run (show): flagged from the first slow run on
    assert [g.label for g in detect.flag_history(runs)] == ["run-8", "run-9", "run-10"]


def _points(values: list[float]) -> list[RunRecord]:
    """Records of one series with these step times (one component, all of the step)."""
    return [RunRecord(label=f"p{i}", recorded_at=f"{i:04d}", tags={}, series="s",
                      hardware="h", devices=1, hosts=1, steps=1, steps_source="x",
                      step_ns=v, components={"compute:gemm": v}, mfu=None)
            for i, v in enumerate(values)]


def test_on_gaussian_noise_few_unchanged_runs_are_flagged_and_large_shifts_are_caught(
        ) -> None:
    """The detector's error rates on simulated series of 11 runs (noise 1%): unchanged
    runs flagged rarely, a 10-sigma shift of the newest (or of the last three) caught."""
    rng = random.Random(7)

    def noise(n: int, level: float = 0.0) -> list[float]:
        return [1e6 * (1 + level + rng.gauss(0, 0.01)) for _ in range(n)]

    n = 600
    false = sum(bool(detect.check(_points(noise(11))).regressions) for _ in range(n)) / n
    newest = sum(bool(detect.check(_points(noise(10) + noise(1, 0.1))).regressions)
                 for _ in range(200)) / 200
    older = [detect.check(_points(noise(8) + noise(3, 0.1))).regressions for _ in range(200)]
    assert false < 0.03, false
    assert newest > 0.95, newest
    assert sum(bool(r) for r in older) / 200 > 0.9
    assert sum(r[0].first_label == "p8" for r in older if r) / sum(map(bool, older)) > 0.9


def test_too_few_runs_are_not_checked_and_a_baseline_decides_by_the_limit(
        tmp_path: Path) -> None:
    runs = series(tmp_path, [1.0, 1.0, 1.0, 1.25])
    res = detect.check(runs)
    assert res.regressions == () and res.series[0].status == "not checked"
    (reg,) = detect.check(runs, baseline="run-0", fail_above=5.0).regressions
    assert reg.baseline_label == "run-0" and reg.spread_ns is None
    assert detect.check(runs, baseline="run-0", fail_above=50.0).regressions == ()


def test_different_device_counts_are_separate_series(tmp_path: Path) -> None:
    one = series(tmp_path, [1.0] * 5)
    two = series(tmp_path, [1.25], devices=2)  # same tags, slower, on two devices
    two = [RunRecord(**{**r.__dict__, "label": "two-0", "recorded_at": "2026-02-01T00:00:00Z"})
           for r in two]
    res = detect.check(one + two)
    assert res.regressions == ()
    assert len(res.series) == 2 and any("2 setups" in n for n in res.notes)


def test_recorded_numbers_are_those_of_compare_summarize_and_collectives(
        tmp_path: Path) -> None:
    p = write_run(tmp_path / "a.xplane.pb", seed=1)
    rec = record(p, "a")
    cmp = json.loads(cli("compare", str(p), str(p), "--format", "json").stdout)
    assert rec.step_ns == pytest.approx(cmp["base"]["step_ns"])
    assert {r["component"]: r["base_ns"] for r in cmp["components"]} == pytest.approx(
        rec.components)
    assert sum(rec.components.values()) == pytest.approx(rec.step_ns)
    summ = json.loads(cli("summarize", str(p), "--format", "json").stdout)
    assert rec.mfu == pytest.approx(summ["headline"]["mfu"], abs=1e-6)
    coll = json.loads(cli("collectives", str(p), "--format", "json").stdout)
    assert {c.type: c.exposed_ns for c in rec.comm} == {
        t["type"]: t["exposed_ns"] for t in coll["by_type"]}
    assert rec.devices == 1 and rec.steps == 4 and rec.comm[0].exposed_ns > 0


def _add(store: Path, path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return cli("history", "add", str(path), "--store", str(store), *more)


def test_cli_check_exits_1_on_a_regression_and_writes_the_documented_json(
        tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    for i, s in enumerate([1.0] * 5 + [1.3]):
        p = write_run(tmp_path / f"n{i}.xplane.pb", seed=i, gemm_scale=s)
        res = _add(store, p, "--label", f"nightly-{i}", "--tag", "model=toy",
                   "--tag", "dtype=fp8", "--recorded-at", f"2026-03-0{i + 1}T00:00:00")
        assert res.returncode == 0, res.stderr
        ok = cli("history", "check", "--store", str(store))
        assert ok.returncode == (1 if i == 5 else 0), (i, ok.stdout)
    res = cli("history", "check", "--store", str(store), "--format", "json")
    assert res.returncode == 1 and "regression: nightly-5" in res.stderr
    rep = json.loads(res.stdout)
    assert [r["label"] for r in rep["runs"]] == [f"nightly-{i}" for i in range(6)]
    assert list(rep["runs"][0])[:4] == ["label", "recorded_at", "tags", "series"]
    assert rep["runs"][0]["tags"] == {"dtype": "fp8", "model": "toy"}
    (reg,) = rep["regressions"]
    assert list(reg)[:7] == ["label", "series", "step_ns", "baseline_step_ns", "change_pct",
                             "first_label", "causes"]
    assert reg["label"] == reg["first_label"] == "nightly-5"
    assert [c["component"] for c in reg["causes"]] == ["compute:gemm"]
    # the limit: a 30% GEMM change is ~12% of the step, so a 20% limit passes it
    assert cli("history", "check", "--store", str(store), "--fail-above", "20").returncode == 0
    # a tag no run has, a baseline no run has: nothing to check is an error, not a pass
    for more in (("--tag", "model=typo"), ("--baseline", "nope")):
        res = cli("history", "check", "--store", str(store), *more)
        assert res.returncode == 2 and res.stderr.startswith(f"error: {store}: no run"), more
    # the same inputs again are the same run
    again = _add(store, tmp_path / "n5.xplane.pb", "--label", "other")
    assert again.returncode == 0 and "already recorded as nightly-5" in again.stderr
    assert len(json.loads(cli("history", "list", "--store", str(store), "--format",
                              "json").stdout)) == 6
    # show: JSON, the component metric, HTML with the regression marked
    page = tmp_path / "h.html"
    shown = cli("history", "show", "--store", str(store), "--metric", "component",
                "--html", str(page), "--format", "json")
    assert shown.returncode == 0
    assert [g["label"] for g in json.loads(shown.stdout)["regressions"]] == ["nightly-5"]
    assert "! nightly-5" in page.read_text()
    # export: Parquet a dashboard reads
    out = tmp_path / "pq"
    assert cli("history", "export", "--store", str(store), "-o", str(out)).returncode == 0
    runs = pl.read_parquet(out / "runs.parquet")
    assert runs["label"].to_list() == [f"nightly-{i}" for i in range(6)]
    assert runs["tag.dtype"].to_list() == ["fp8"] * 6
    comps = pl.read_parquet(out / "components.parquet")
    assert comps.group_by("label").agg(pl.col("ns").sum()).sort("label")["ns"].to_list() == \
        pytest.approx(runs.sort("label")["step_ns"].to_list())


def test_html_escapes_labels_and_tags(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    p = write_run(tmp_path / "x.xplane.pb", seed=3)
    evil = "<script>alert(1)</script>"
    assert _add(store, p, "--label", evil, "--tag", f"model={evil}").returncode == 0
    page = tmp_path / "h.html"
    assert cli("history", "show", "--store", str(store), "--html", str(page)).returncode == 0
    text = page.read_text()
    assert "alert(1)" in text and "<script>alert(1)" not in text


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "newer"])
def test_a_bad_store_is_exit_2_in_one_line_and_left_as_it_is(tmp_path: Path,
                                                            damage: str) -> None:
    store = tmp_path / "runs.db"
    p = write_run(tmp_path / "x.xplane.pb", seed=4)
    if damage == "garbage":
        store.write_bytes(b"not a database at all\n" * 100)
    elif damage == "foreign":
        with sqlite3.connect(store) as c:
            c.execute("CREATE TABLE t (x)")
    else:
        assert _add(store, p, "--label", "one").returncode == 0
        with sqlite3.connect(store) as c:  # fold the WAL into the file
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if damage == "newer":
                c.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
        if damage == "truncated":
            data = store.read_bytes()
            store.write_bytes(data[:len(data) // 2] + b"\x00" * 7 + data[len(data) // 2 + 7:])
    before = store.read_bytes()
    for args in (("history", "add", str(write_run(tmp_path / "y.xplane.pb", seed=5)),
                  "--store", str(store)), ("history", "list", "--store", str(store)),
                 ("history", "check", "--store", str(store))):
        res = cli(*args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert res.stderr.count("\n") == 1 and str(store) in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
    assert store.read_bytes() == before


def test_a_missing_store_is_not_created_by_readers(tmp_path: Path) -> None:
    res = cli("history", "list", "--store", str(tmp_path / "none.db"))
    assert res.returncode == 2 and "no such run store" in res.stderr
    assert not (tmp_path / "none.db").exists()


_WRITER = """
import pickle, sys, time
from dataclasses import replace
from tracelens.history.store import open_store
rec = pickle.load(open(sys.argv[1], "rb"))
who, n, start = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
while time.time() < start:
    time.sleep(0.001)
for i in range(n):
    with open_store(sys.argv[5], create=True) as s:
        s.add(replace(rec, label=f"{who}-{i}", inputs_hash=f"{who}-{i}"))
"""


def test_two_processes_adding_at_once_lose_nothing(tmp_path: Path) -> None:
    import pickle
    import time

    rec = record(write_run(tmp_path / "x.xplane.pb", seed=6), "x")
    (tmp_path / "rec.pkl").write_bytes(pickle.dumps(rec))
    store = tmp_path / "runs.db"  # absent: both processes create it at once too
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.time() + 1.5  # both past their imports
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / "rec.pkl"), who,
                               "40", str(start), str(store)], env=env,
                              stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    with open_store(store) as s:
        labels = sorted(r.label for r in s.runs())
    assert labels == sorted(f"{w}-{i}" for w in "ab" for i in range(40))


def test_a_failed_add_creates_no_store(tmp_path: Path) -> None:
    bad = tmp_path / "notrace.json"
    bad.write_text("hello\n")
    res = _add(tmp_path / "runs.db", bad)
    assert res.returncode == 2 and str(bad) in res.stderr
    assert not (tmp_path / "runs.db").exists()


SAMPLE_2HOST = ROOT / "sample_traces" / "mi355x_2x8gpu_straggler"
REAL_8GPU = ROOT.parent / "shared" / "traces" / "xprof" / "mi300x_jax08_conv_8gpu.xplane.pb"


@pytest.mark.parametrize("path", [SAMPLE_2HOST, REAL_8GPU], ids=["2host_sample", "real_8gpu"])
def test_a_job_is_recorded_with_compare_s_numbers(tmp_path: Path, path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} absent (shared traces not beside the checkout)")
    store = tmp_path / "runs.db"
    assert _add(store, path, "--label", "job").returncode == 0
    (rec,) = json.loads(cli("history", "list", "--store", str(store), "--format",
                            "json").stdout)
    cmp = json.loads(cli("compare", str(path), str(path), "--format", "json").stdout)
    assert rec["step_ns"] == cmp["base"]["step_ns"] and rec["devices"] == cmp["base"]["devices"]
    assert rec["components"] == {r["component"]: r["base_ns"] for r in cmp["components"]}
    assert rec["hosts"] == (2 if path == SAMPLE_2HOST else 1)


def test_the_engine_records_what_one_process_records(tmp_path: Path) -> None:
    """``history add`` maps the hosts on the engine; in this process, on a local cluster of
    two workers and with everything loaded here, the record is the same (two small hosts
    with no wall clock, aligned on their collective ends)."""
    from tests.synth_helpers import write_skewed_hosts
    from tracelens.history.record import record_job

    job = write_skewed_hosts(tmp_path, (None, None))
    inputs, ident = hash_inputs([job], None, ())
    args = ([job], "job", {"k": "v"}, "2026-01-01T00:00:00.000000Z", inputs, ident)
    here = record_run(*args)
    assert record_job(*args, workers=1) == here
    assert record_job(*args, workers=2) == here
    assert here.hosts == 2 and here.devices == 2 and [c.type for c in here.comm] == [
        "all-reduce"]


def test_an_older_store_is_migrated_forward_on_open_with_its_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracelens.history import store as st

    db = tmp_path / "runs.db"
    rec = record(write_run(tmp_path / "x.xplane.pb", seed=8), "old")
    with open_store(db, create=True) as s:
        s.add(rec)

    def to_v2(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE runs ADD COLUMN note TEXT")

    monkeypatch.setattr(st, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setitem(st.MIGRATIONS, SCHEMA_VERSION + 1, to_v2)
    with open_store(db) as s:
        assert s.runs() == [rec]
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT version FROM schema_version").fetchall() == [
            (SCHEMA_VERSION + 1,)]
        assert "note" in [r[1] for r in c.execute("PRAGMA table_info(runs)")]


def test_a_store_held_while_opened_is_waited_for(tmp_path: Path, monkeypatch) -> None:
    """SQLite answers some lock conflicts at once, without its busy timeout (a journal-mode
    change, a read meeting another process creating the file): opening waits and checks
    again, and only a store held past the timeout is an error, saying so in one line."""
    import sqlite3

    from tracelens.core.errors import TraceInputError
    from tracelens.history import store as st

    real, calls = st._prepare, []

    def busy_twice(conn, path, create):
        calls.append(1)
        if len(calls) <= 2:
            raise sqlite3.OperationalError("database is locked")
        return real(conn, path, create)
    monkeypatch.setattr(st, "_prepare", busy_twice)
    with open_store(tmp_path / "runs.db", create=True) as s:
        assert s.runs() == [] and len(calls) == 3

    def always_busy(conn, path, create):
        raise sqlite3.OperationalError("database is locked")
    monkeypatch.setattr(st, "_prepare", always_busy)
    monkeypatch.setattr(st, "BUSY_TIMEOUT_S", 0.2)
    with pytest.raises(TraceInputError, match="another process held the run store"):
        open_store(tmp_path / "runs.db", create=True)


def test_check_names_findings_that_appeared_since_the_baseline(tmp_path: Path) -> None:
    """Issue 47: a run whose GPU 3 computes 50% slower than its peers (planted) gets the
    finding "find why ... GPU3 is late"; ``history check`` against the run without it names
    that finding as appeared, as ``summarize`` of each run says (a finding is its kind and
    target). A run recorded before the store kept findings is said to be uncompared."""
    from tracelens_dev.synth import Scenario, build
    from tracelens_dev.synth.scenario import Straggler
    from tracelens_dev.writers.xspace import write

    store = tmp_path / "runs.db"
    for label, lag in (("even", None), ("late", Straggler(0, 3, 1.5))):
        syn = build(Scenario(hosts=1, gpus=8, steps=2, layers=1, seed=3, straggler=lag))
        write(syn.trace, tmp_path / label)
        assert _add(store, tmp_path / label, "--label", label).returncode == 0
    res = cli("history", "check", "--store", str(store), "--baseline", "even",
              "--format", "json")
    (series,) = json.loads(res.stdout)["series"]
    late = json.loads(cli("summarize", str(tmp_path / "late"), "--format", "json").stdout)
    even = json.loads(cli("summarize", str(tmp_path / "even"), "--format", "json").stdout)
    keys = {f"{f['kind']} {f['target']}" for f in even["findings"]["items"]}
    want = [f["title"] for f in late["findings"]["items"]
            if f"{f['kind']} {f['target']}" not in keys]
    assert series["findings_appeared"] == want
    assert any(t.startswith("Find why mi355x-node0/GPU3 is late") for t in want)
    table = cli("history", "check", "--store", str(store), "--baseline", "even").stdout
    assert "Findings since the baseline" in table and "GPU3 is late" in table
    # a store of schema 1 (before findings): its runs' findings are unknown, not none
    with sqlite3.connect(store) as c:
        c.execute("UPDATE runs SET findings_recorded = 0 WHERE label = 'even'")
    (series,) = json.loads(cli("history", "check", "--store", str(store), "--baseline",
                               "even", "--format", "json").stdout)["series"]
    assert series["findings_appeared"] is None and series["findings_vanished"] is None
    assert "findings not compared" in cli("history", "check", "--store", str(store),
                                          "--baseline", "even").stdout


def test_a_read_only_store_of_schema_1_is_read_as_it_is(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A store of the schema before findings that may not be written (a CI artifact): the
    readers read it at its own version, its runs' findings unknown, the file untouched. (The
    file's mode is not what makes it read-only here: root may write any file, so the test
    says the process may not write it, as ``os.access`` would for another user.)"""
    import hashlib

    from tracelens.history import store as st

    store = tmp_path / "runs.db"
    for i in range(2):
        p = write_run(tmp_path / f"r{i}.xplane.pb", seed=i)
        assert _add(store, p, "--label", f"r{i}").returncode == 0
    with sqlite3.connect(store) as c:  # back to schema 1, as an older tracelens wrote it
        c.execute("DROP TABLE findings")
        c.execute("ALTER TABLE runs DROP COLUMN findings_recorded")
        c.execute("UPDATE schema_version SET version = 1")
    c.close()
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    real = os.access
    monkeypatch.setattr(st.os, "access", lambda path, mode, **kw: False if (
        mode == os.W_OK and Path(path) == store) else real(path, mode, **kw))
    res = cli("history", "check", "--store", str(store), "--baseline", "r0", "--format", "json")
    assert res.returncode == 0, res.stderr
    (series,) = json.loads(res.stdout)["series"]
    assert series["findings_appeared"] is None
    with open_store(store) as s:
        assert [r.findings for r in s.runs()] == [None, None]
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before
    monkeypatch.setattr(st.os, "access", real)  # writable: migrated on open, as before
    with open_store(store) as s:
        assert [r.findings for r in s.runs()] == [None, None]  # recorded without: unknown
    with sqlite3.connect(store) as c:
        assert c.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    c.close()
