"""Issue 12 item 6: every XStat value type decodes on both decoders (uint64 exactly), values the
model cannot hold are null and counted, TPU-only traces and TensorFlow-style GPU planes read,
and seeded mutations of stats, event order and length end in a Trace or one TraceInputError."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from parsers import xspace as xspace_reader
from parsers.xspace import native as xspace_native
from tracelens_dev.writers.xspace import Activity, InlineStr, Ref, UInt64, build_xspace
from tracelens.cli.commands import main
from tracelens.loading.devices import identify_devices
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Trace

BIG = 9646411105960254074  # the uint64 of the real TPU trace that failed (> 2**63)
DECODERS = ["python", "c"] if xspace_native.available() else ["python"]
# one value of every XStat oneof member (and none): double, uint64 (small and > 2**63),
# int64 (negative), str inline, bytes, ref to a defined and to an undefined XStatMetadata
VALUES = [1.5, UInt64(7), UInt64(BIG), UInt64(2**64 - 1), -3, InlineStr("inline"),
          b"\x00\xff", "interned", Ref(99999), None]
COLUMNS = ["correlation_id", "hlo_op", "hlo_module", "program_id", "memcpy_details",
           "device_ordinal", "step_num"]


def _acts() -> list[Activity]:
    return [Activity(0, 1, f"kernel_{i}", 100 * i, 50, {col: VALUES[(i + j) % len(VALUES)]
                                                        for j, col in enumerate(COLUMNS)})
            for i in range(len(VALUES))]


def _read(path: Path, decoder: str) -> Trace:
    """The reader's trace with its devices identified, as ``tracelens.load`` reads a file."""
    t = xspace_reader.read(path, decoder=decoder)
    identify_devices(t)
    return t


def _read_all(path: Path) -> list[object]:
    out: list[object] = []
    for d in DECODERS:
        try:
            out.append(_read(path, decoder=d))
        except TraceInputError as exc:
            out.append(exc)
    return out


def test_every_stat_type_in_every_column(tmp_path: Path) -> None:
    p = tmp_path / "types.xplane.pb"
    p.write_bytes(build_xspace(_acts(), steps=[(UInt64(BIG), 0, 10), (3, 10, 20)]))
    traces = _read_all(p)
    for t in traces:
        assert not isinstance(t, TraceInputError), t
    ref = traces[0]
    for t in traces[1:]:
        assert t.events.equals(ref.events) and t.meta.warnings == ref.meta.warnings
    ev = ref.events.sort("start_ns")
    # string columns keep the uint64 exactly, as its decimal text
    assert str(BIG) in ev["op"].to_list() and str(2**64 - 1) in ev["op"].to_list()
    assert "1.5" in ev["op"].to_list() and "inline" in ev["op"].to_list()
    # integer columns: values that fit are exact, uint64 above 2**63-1 are null and counted
    assert 7 in ev["correlation_id"].to_list() and -3 in ev["correlation_id"].to_list()
    n_big = sum(1 for i in range(len(VALUES)) for j, col in enumerate(COLUMNS)
                if col in ("correlation_id", "program_id")
                and VALUES[(i + j) % len(VALUES)] in (BIG, 2**64 - 1)
                and type(VALUES[(i + j) % len(VALUES)]) is UInt64)
    said = sum(int(w.split(": ")[1].split()[0]) for w in ref.meta.warnings
               if "above 2^63-1" in w and ("correlation_id" in w or "program_id" in w))
    assert said == n_big > 0
    j = COLUMNS.index("step_num")
    n_step = 1 + sum(1 for i in range(len(VALUES)) if type(VALUES[(i + j) % len(VALUES)])
                     is UInt64 and VALUES[(i + j) % len(VALUES)] >= 2**63)  # + the host marker
    assert any(f"{n_step} step_num values are uint64 above 2^63-1" in w
               for w in ref.meta.warnings)
    assert ref.steps["step"].to_list() == [3]


def test_uint64_plane_stats_do_not_crash(tmp_path: Path) -> None:
    """The real TPU trace's failure: ``could not append value ... of type: i128``."""
    p = tmp_path / "plane.xplane.pb"
    p.write_bytes(build_xspace([Activity(0, 1, "k", 0, 10)], device_stats={0: {
        "device_vendor": "AMD", "memory_size": UInt64(BIG), "clock_rate": UInt64(BIG),
        "core_count": UInt64(BIG), "compute_cap_major": 9, "compute_cap_minor": 4}}))
    for t in _read_all(p):
        assert not isinstance(t, TraceInputError), t
        row = t.devices.row(0, named=True)
        assert row["memory_bytes"] is None and row["compute_units"] is None
        assert row["clock_mhz"] is None and row["arch"] == "gfx942"
        bad = [w for w in t.meta.warnings if "is not a usable value" in w]
        assert len(bad) == 3 and str(BIG) in bad[0]


def test_tpu_trace_reads_its_ops_and_leaves_uint64_values_unknown(tmp_path: Path) -> None:
    """TPU planes are read (issue 48; they were ignored before): XLA's op stats on the event
    metadata, as real traces keep them, with a uint64 program id (a fingerprint, kept as its
    64 bits so the ops join their module) and a uint64 all-ones FLOPs count, which stays
    unknown; a plane without its own peaks has none."""
    acts = [Activity(d, 1, f"%fusion.{i} = f32[8]{{0}} fusion(f32[8]{{0}} %p), kind=kLoop",
                     i * 100, 50, md_stats={"program_id": UInt64(BIG),
                                            "flops": UInt64(2**64 - 1), "bytes_accessed": 1.5,
                                            "hlo_category": InlineStr("loop fusion")},
                     display_name=f"fusion.{i}", line_name="XLA Ops")
            for i in range(5) for d in (0, 1)]
    p = tmp_path / "tpu.xplane.pb"
    p.write_bytes(build_xspace(acts, device_plane="/device:TPU:",
                               device_stats={0: {"peak_teraflops_per_second": 197.0,
                                                 "device_type_string": "TPU v5 Lite"}, 1: {}},
                               modules=[(f"jit_f({BIG})", b"", UInt64(BIG))]))
    for d in DECODERS:
        r = CliRunner().invoke(main, ["summarize", str(p)], env={xspace_native.ENV: d})
        assert r.exit_code == 0, r.output
        assert "not analyzed" not in r.output and "No device activity" not in r.output
        assert "HLO modules have no" not in r.output  # the uint64 id joins
        assert "uint64 above" not in r.output  # TPU program ids are not read as Int64
        t = _read(p, decoder=d)
        assert t.events.height == 10
        assert t.events["op"].cast(pl.String).to_list()[:2] == ["fusion.0", "fusion.1"]
        assert t.events["hlo_category"].cast(pl.String).unique().to_list() == ["loop fusion"]
        assert t.events["flops"].null_count() == 10 and t.events["bytes"].to_list()[0] == 1.5
        assert t.events["program_id"].to_list() == [BIG - 2**64] * 10  # the same 64 bits
        assert t.modules["program_id"].to_list() == [BIG - 2**64]
        assert t.devices["product"].to_list() == ["TPU v5 Lite", None]
        assert t.devices["peak_tflops"].to_list() == [197.0, None]


def _v100_space(name: str | None, vendor: str | None, cap: tuple[int, int] = (7, 0),
                cores: int = 80) -> bytes:
    # TensorFlow's GPU planes: the capability stats, no device_vendor (older collectors)
    stats = {"clock_rate": 1_530_000, "core_count": cores,
             "memory_bandwidth": UInt64(898 * 10**9), "memory_size": UInt64(16_945_512_448),
             "compute_cap_major": cap[0], "compute_cap_minor": cap[1]}
    if name is not None:
        stats["gpu_device_name"] = InlineStr(name)
    if vendor is not None:
        stats["device_vendor"] = InlineStr(vendor)
    acts = [Activity(d, 14, "volta_sgemm_128x64_nn", 100, 50, line_name="Stream #14(Kernel)")
            for d in range(8)]
    return build_xspace(acts, device_stats={d: stats for d in range(8)})


@pytest.mark.parametrize("decoder", DECODERS)
def test_tensorflow_v100_planes_are_named_from_their_strings(tmp_path: Path,
                                                             decoder: str) -> None:
    p = tmp_path / "v100.xplane.pb"
    p.write_bytes(_v100_space("Tesla V100-SXM2-16GB", None))
    t = _read(p, decoder=decoder)
    assert t.devices["product"].to_list() == ["NVIDIA V100"] * 8
    assert t.devices["spec_id"].to_list() == ["v100"] * 8
    assert t.devices["vendor"].to_list() == ["nvidia"] * 8
    assert t.devices["arch"].to_list() == ["sm_70"] * 8
    r = CliRunner().invoke(main, ["summarize", str(p)], env={xspace_native.ENV: decoder})
    assert r.exit_code == 0 and "8× NVIDIA V100" in r.output, r.output
    # an unknown product keeps the trace's own name, never "unknown device"
    p.write_bytes(_v100_space("Tesla K80", None, (3, 7), 13))
    t = _read(p, decoder=decoder)
    assert t.devices["product"].to_list() == ["Tesla K80"] * 8
    assert t.devices["spec_id"].to_list() == [None] * 8


@pytest.mark.parametrize("decoder", DECODERS)
def test_tensorflow_v100_planes_without_name_or_vendor_are_v100s(tmp_path: Path,
                                                                 decoder: str) -> None:
    """Issue 25 A3: a TensorFlow XSpace of V100s (compute capability 7.0, 80 SMs, 1530 MHz,
    16.9 GB, no device_vendor, no name) was '8× unknown device' with no peaks: 7.0 with 80
    SMs is only NVIDIA's reading of the capability, and only a V100 there."""
    p = tmp_path / "v100.xplane.pb"
    p.write_bytes(_v100_space(None, None))
    t = _read(p, decoder=decoder)
    assert t.devices["spec_id"].to_list() == ["v100"] * 8
    assert t.devices["vendor"].to_list() == ["nvidia"] * 8
    assert t.devices["arch"].to_list() == ["sm_70"] * 8
    assert any("devices 0-7: no device_vendor stat: identified as NVIDIA V100 from compute "
               "capability 7.0 and 80 cores" in w for w in t.meta.warnings), t.meta.warnings
    r = CliRunner().invoke(main, ["summarize", str(p)], env={xspace_native.ENV: decoder})
    assert r.exit_code == 0 and "8× NVIDIA V100" in r.output, r.output
    assert "NVIDIA V100: HBM 0.9 TB/s" in r.output  # peaks, none before
    # 9.0 with 120 cores is no product under either reading (an MI100 of old ROCm TF): unknown
    p.write_bytes(_v100_space(None, None, (9, 0), 120))
    t = _read(p, decoder=decoder)
    assert t.devices["spec_id"].to_list() == [None] * 8
    assert t.devices["vendor"].to_list() == [None] * 8


def _named_plane_and_idle_ones(first: dict[str, object], idle: dict[str, object]) -> bytes:
    acts = [Activity(0, 2, "Cijk_Alik_Bljk_BBS_BH_MT256x256x64", 100, 50,
                     line_name="Stream #2")]
    return build_xspace(acts, device_stats={0: first, **{d: idle for d in range(1, 8)}})


MI355X = {"device_vendor": "AMD", "clock_rate": 2_400_000, "core_count": 256,
          "memory_bandwidth": UInt64(4_096_000_000_000), "memory_size": UInt64(309_220_868_096),
          "compute_cap_major": 9, "compute_cap_minor": 5, "gpu_device_name": InlineStr("gfx950")}


@pytest.mark.parametrize("decoder", DECODERS)
def test_idle_planes_with_the_same_stats_get_the_same_identification(tmp_path: Path,
                                                                     decoder: str) -> None:
    """Issue 25 A3: on a real MI355X trace the 7 GPUs without activity were '7× unknown
    device' though their planes say device_vendor=AMD: only GPU 0's plane carried the
    capability stats. A plane whose every stat agrees with an identified sibling's is that
    product; one whose stats disagree, or a vendor alone beside two products, stays unknown."""
    p = tmp_path / "mi355x.xplane.pb"
    p.write_bytes(_named_plane_and_idle_ones(MI355X, {"device_vendor": InlineStr("AMD")}))
    t = _read(p, decoder=decoder)
    assert t.devices["spec_id"].to_list() == ["mi355x"] * 8
    assert t.devices["product"].to_list() == ["AMD Instinct MI355X"] * 8
    assert t.devices["compute_units"].to_list() == [256] + [None] * 7  # nothing invented
    assert any("devices 1-7: identified as AMD Instinct MI355X like device 0 of the same "
               "file" in w and "theirs lack arch, compute_units, clock_mhz, memory_bytes" in w
               for w in t.meta.warnings), t.meta.warnings
    r = CliRunner().invoke(main, ["summarize", str(p)], env={xspace_native.ENV: decoder})
    assert r.exit_code == 0 and "8× AMD Instinct MI355X" in r.output, r.output
    # a disagreeing stat (another core count) is not the sibling's product
    p.write_bytes(_named_plane_and_idle_ones(MI355X, {"device_vendor": InlineStr("AMD"),
                                                      "core_count": 304}))
    t = _read(p, decoder=decoder)
    assert t.devices["spec_id"].to_list() == ["mi355x"] + [None] * 7
    # a product the plane's name says (H800: an H100 by its stats) is shared the same way
    h800 = {"device_vendor": InlineStr("Nvidia"), "core_count": 132, "clock_rate": 1_980_000,
            "memory_size": UInt64(85_000_000_000), "compute_cap_major": 9,
            "compute_cap_minor": 0, "gpu_device_name": InlineStr("NVIDIA H800")}
    p.write_bytes(_named_plane_and_idle_ones(h800, {"device_vendor": InlineStr("Nvidia"),
                                                    "core_count": 132}))
    t = _read(p, decoder=decoder)
    assert t.devices["spec_id"].to_list() == ["h800"] * 8
    # beside two products a vendor alone says nothing: unknown
    p.write_bytes(build_xspace([], device_stats={0: MI355X, 1: dict(MI355X, core_count=304,
                                                                    clock_rate=2_100_000,
                                                                    compute_cap_minor=4,
                                                                    gpu_device_name=InlineStr(
                                                                        "gfx942")),
                                                 2: {"device_vendor": InlineStr("AMD")}}))
    t = _read(p, decoder=decoder)
    assert t.devices["spec_id"].to_list()[2] is None


def test_identification_notes_keep_the_order_of_the_file(tmp_path: Path) -> None:
    """Issue 26: devices are identified after the reader (tracelens.loading.devices), and each note
    goes where the reader warned about that plane: plane 0's unusable stat, its bandwidth
    note (the same text for plane 1, said once), plane 1's unusable stat."""
    import tracelens

    odd = dict(MI355X, compute_cap_major=InlineStr("nine"))
    p = tmp_path / "mi355x.xplane.pb"
    p.write_bytes(build_xspace([Activity(d, 2, "k", 100, 50) for d in (0, 1)],
                               device_stats={0: odd, 1: odd}))
    t = tracelens.load(p)
    assert t.devices["spec_id"].to_list() == ["mi355x"] * 2
    got = [w for w in t.meta.warnings if "plane stat" in w or "memory_bandwidth" in w]
    assert [w.split(": ")[1] for w in got] == ["/device:GPU:0", "AMD Instinct MI355X",
                                              "/device:GPU:1"], got


def test_name_never_overrides_what_the_trace_says(tmp_path: Path) -> None:
    """A V100 name on a plane whose vendor says AMD identifies nothing (no guess)."""
    p = tmp_path / "odd.xplane.pb"
    p.write_bytes(_v100_space("Tesla V100-SXM2-16GB", "AMD"))
    t = _read(p, decoder=DECODERS[-1])
    assert t.devices["spec_id"].to_list() == [None] * 8


# ---------------------------------------------------------------------------------------------
# Seeded mutations through tracelens.load: a Trace or one TraceInputError, decoders agree
# ---------------------------------------------------------------------------------------------

def _mutated(rng: random.Random) -> bytes:
    acts = []
    for i in range(40):
        stats = {"correlation_id": i, "hlo_op": f"fusion.{i % 7}", "program_id": 3,
                 "hlo_module": "jit_step"}
        for col in rng.sample(COLUMNS, rng.randrange(0, 4)):  # wrong-typed or null values
            stats[col] = rng.choice(VALUES)
        start = rng.randrange(0, 10_000) if rng.random() < 0.3 else 100 * i  # out of order
        acts.append(Activity(rng.randrange(2), 1 + i % 2, f"kernel_{i % 9}", start,
                             rng.choice([0, 10, 50, 2**40]), stats))
    blob = build_xspace(acts, steps=[(0, 0, 2000), (rng.choice([1, UInt64(BIG), -1]), 2000,
                                                     4000)],
                        device_stats={0: {"device_vendor": "AMD", "core_count": rng.choice(
                            VALUES), "memory_size": rng.choice(VALUES)}, 1: {}},
                        profile_start_ns=rng.choice([None, 1_700_000_000_000_000_000,
                                                     UInt64(2**64 - 1), -5, 2.5]))
    if rng.random() < 0.3:
        blob = blob[:rng.randrange(1, len(blob))]
    return blob


def test_seeded_mutations_through_load(tmp_path: Path) -> None:
    import tracelens

    rng = random.Random(12)
    outcomes = {"ok": 0, "refused": 0}
    for k in range(40):
        p = tmp_path / f"m{k}.xplane.pb"
        p.write_bytes(_mutated(rng))
        results = []
        for d in DECODERS:
            try:
                results.append(_load_with(p, d, tracelens))
            except TraceInputError as exc:
                results.append(exc)
        if isinstance(results[0], TraceInputError):
            assert all(isinstance(r, TraceInputError) for r in results), results
            assert "\n" not in str(results[0])
            outcomes["refused"] += 1
            continue
        assert not any(isinstance(r, TraceInputError) for r in results), results
        for r in results[1:]:
            assert r.events.equals(results[0].events)
            assert r.meta.warnings == results[0].meta.warnings
        outcomes["ok"] += 1
    assert outcomes["ok"] and outcomes["refused"]  # both branches were exercised


def _load_with(path: Path, decoder: str, tracelens: object) -> object:
    import os

    old = os.environ.get(xspace_native.ENV)
    os.environ[xspace_native.ENV] = decoder
    try:
        return tracelens.load(path)  # type: ignore[attr-defined]
    finally:
        if old is None:
            del os.environ[xspace_native.ENV]
        else:
            os.environ[xspace_native.ENV] = old


def test_mutations_through_the_cli_never_traceback(tmp_path: Path) -> None:
    rng = random.Random(5)
    for k in range(12):
        p = tmp_path / f"c{k}.xplane.pb"
        p.write_bytes(_mutated(rng))
        r = CliRunner().invoke(main, ["summarize", "--format", "json", str(p)])
        assert r.exit_code in (0, 2), (r.exit_code, r.output, r.exception)
        if r.exit_code == 2:
            lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
            assert len(lines) == 1 and "Traceback" not in r.output
        assert pl is not None


def test_uint64_profile_start_in_a_log_directory(tmp_path: Path) -> None:
    """A host whose profile_start_time does not fit int64 made combining hosts fail with a
    polars SchemaError traceback (Int64 vs Int128); now that start is unknown, said once."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.xplane.pb").write_bytes(build_xspace([Activity(0, 1, "k", 0, 10)], host="a",
                                                   profile_start_ns=UInt64(2**64 - 1)))
    (run / "b.xplane.pb").write_bytes(build_xspace([Activity(0, 1, "k", 0, 10)], host="b"))
    r = CliRunner().invoke(main, ["summarize", str(run)])
    assert r.exit_code == 0, (r.output, r.exception)
    assert "profile_start_time = 18446744073709551615 is not a usable nanosecond time" \
        in r.output


def test_out_of_range_plane_name_and_process_id(tmp_path: Path) -> None:
    """A GPU ordinal of 23 digits and a uint64 process id made polars fail on an Int64
    literal (a traceback); now the plane is skipped and the pid unknown, each said."""
    from parsers.xplane_schema import xspace_class

    space = xspace_class()()
    space.ParseFromString(build_xspace([Activity(0, 1, "k", 0, 10)], steps=[(1, 0, 10)]))
    space.planes[0].name = "/device:GPU:99999999999999999999999"
    host = next(p for p in space.planes if p.name == "/host:CPU")
    host.stat_metadata[99].id = 99
    host.stat_metadata[99].name = "process_id"
    host.stats.add(metadata_id=99, uint64_value=2**64 - 1)
    p = tmp_path / "odd.xplane.pb"
    p.write_bytes(space.SerializeToString())
    for t in _read_all(p):
        assert not isinstance(t, TraceInputError), t
        assert t.devices.height == 0 and t.host_events["pid"].null_count() == t.host_events.height
        assert any("ignored 1 events on /device:GPU:99999999999999999999999" in w
                   for w in t.meta.warnings)
        assert any("process_id = 18446744073709551615 is not a usable value" in w
                   for w in t.meta.warnings)
