"""The C XSpace decoder (``parsers/_xspace.c`` via ``parsers.xspace.native``) gives exactly what
the per-event reader over protobuf messages gives: on the real traces, the samples, random
synthetic scenarios, hand-made edge cases of the wire format, and corrupted files (both
refuse the same files, the C one never crashes or hangs)."""

from __future__ import annotations

import random
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from parsers import xspace as xspace_reader
from parsers.xspace import native as xspace_native
from tracelens_dev.writers.xspace_encode import field_bytes, field_varint, tag, varint
from parsers.xplane_schema import xspace_class
from parsers.xspace.facts import decoders
from tracelens_dev.writers.xspace import Activity, build_xspace, write
from tests.conftest import REAL_XPROF, SAMPLES
from tracelens.core.errors import TraceInputError
from tracelens_dev.synth import Scenario, build

pytestmark = pytest.mark.skipif(not xspace_native.available(),
                                reason=f"C decoder not built: "
                                       f"{xspace_native.unavailable_reason()}")
FRAMES = ("events", "host_events", "steps", "devices", "modules")


def read_both(path: Path) -> tuple[object, object]:
    """(per-event reader, C decoder) results: a Trace or the TraceInputError raised."""
    out = []
    for decoder in ("python", "c"):
        try:
            out.append(xspace_reader.read(path, decoder=decoder))
        except TraceInputError as exc:
            out.append(exc)
    return out[0], out[1]


def assert_same(path: Path) -> object:
    ref, fast = read_both(path)
    if isinstance(ref, TraceInputError) or isinstance(fast, TraceInputError):
        assert isinstance(ref, TraceInputError) and isinstance(fast, TraceInputError), \
            (path, ref, fast)
        return ref
    for key in FRAMES:
        assert_frame_equal(getattr(ref, key), getattr(fast, key))
    assert ref.meta.warnings == fast.meta.warnings
    assert ref.meta.sources == fast.meta.sources
    assert ref.meta.hosts == fast.meta.hosts
    assert decoders(ref.meta) == {str(path): "python"}
    assert decoders(fast.meta) == {str(path): "c"}
    return fast


def _inputs() -> list[Path]:
    files = sorted(REAL_XPROF.glob("*.xplane.pb*")) if REAL_XPROF.exists() else []
    return files + sorted(SAMPLES.rglob("*.xplane.pb*"))


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_real_traces_and_samples_identical(path: Path) -> None:
    trace = assert_same(path)
    assert not isinstance(trace, TraceInputError)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(device=st.sampled_from(["mi300x", "mi355x", "h100"]), moe=st.booleans(),
       fsdp=st.booleans(), launches=st.booleans(), async_markers=st.booleans(),
       seed=st.integers(0, 10_000))
def test_random_synthetic_scenarios_identical(tmp_path_factory: pytest.TempPathFactory,
                                              device: str, moe: bool, fsdp: bool,
                                              launches: bool, async_markers: bool,
                                              seed: int) -> None:
    sc = Scenario(device=device, gpus=2, layers=1, steps=2, moe=moe, fsdp=fsdp,
                  host_launches=launches, async_markers=async_markers, seed=seed)
    path = tmp_path_factory.mktemp("syn") / "t.xplane.pb"
    write(build(sc, truth=False).trace, path)
    assert_same(path)


# ---------------------------------------------------------------------------------------------
# Hand-made wire-format edge cases
# ---------------------------------------------------------------------------------------------

def _space_with(events: list[bytes], *, line_name: str = "Stream #7", ts: int = 5,
                plane_extra: bytes = b"", host_events: list[bytes] = (),
                md_stats: dict[int, list[bytes]] | None = None) -> bytes:
    """A one-GPU XSpace whose line holds the given serialized XEvents. Event metadata ids 1-3
    are named; stat metadata: 1 hlo_op, 2 correlation_id, 3 program_id, 4 hlo_module,
    5 memcpy_details, 6 device_ordinal, 7 step_num, 8.. interned strings."""
    space = xspace_class()()
    plane = space.planes.add(id=0, name="/device:GPU:0")
    for i, name in enumerate(["fusion.1.kd", "MemcpyHtoD", "gemm"], start=1):
        plane.event_metadata[i].id = i
        plane.event_metadata[i].name = name
    for i, name in enumerate(["hlo_op", "correlation_id", "program_id", "hlo_module",
                              "memcpy_details", "device_ordinal", "step_num", "fusion.1",
                              "jit_step", "size:4096 kind:HtoD"], start=1):
        plane.stat_metadata[i].id = i
        plane.stat_metadata[i].name = name
    for mid, bodies in (md_stats or {}).items():  # XEventMetadata.stats is field 5
        plane.event_metadata[mid].MergeFromString(b"".join(field_bytes(5, b) for b in bodies))
    head = plane.SerializeToString()
    line = (field_varint(1, 7) + field_bytes(2, line_name.encode()) + field_varint(3, ts)
            + b"".join(field_bytes(4, e) for e in events))
    host = xspace_class()()
    hp = host.planes.add(name="/host:CPU")
    hp.stat_metadata[2].id = 2
    hp.stat_metadata[2].name = "correlation_id"
    hp.stat_metadata[7].id = 7
    hp.stat_metadata[7].name = "step_num"
    hp.event_metadata[1].id = 1
    hp.event_metadata[1].name = "hipLaunchKernel"
    hline = field_varint(1, 3) + field_varint(3, 0) + field_bytes(2, b"Host Threads/3") + \
        b"".join(field_bytes(4, e) for e in host_events)
    host_plane = hp.SerializeToString() + field_bytes(3, hline)
    return (field_bytes(1, head + field_bytes(3, line) + plane_extra)
            + field_bytes(1, host_plane) + field_bytes(4, b"host0"))


def _stat(md: int, field: int, value: object) -> bytes:
    return field_bytes(4, _stat_body(md, field, value))


def _stat_body(md: int, field: int, value: object) -> bytes:
    body = field_varint(1, md)
    if field == 2:
        body += tag(2, 1) + struct.pack("<d", value)
    elif field in (5, 6):
        body += field_bytes(field, value if isinstance(value, bytes) else value.encode())
    elif field == 0:
        pass  # a stat without a value
    else:
        body += field_varint(field, value)
    return body


def _event(md: int = 1, off: int = 1000, dur: int = 5000, stats: bytes = b"",
           first: bytes = b"", last: bytes = b"") -> bytes:
    return first + field_varint(1, md) + field_varint(2, off) + field_varint(3, dur) + stats + last


EDGE_CASES = {
    "plain": [_event(stats=_stat(1, 7, 8) + _stat(4, 7, 9) + _stat(3, 4, 17) + _stat(2, 3, 5))],
    "fields reordered": [field_varint(3, 5000) + _stat(1, 7, 8) + field_varint(2, 1000)
                         + field_varint(1, 1)],
    "num_occurrences takes the oneof": [_event() + field_varint(5, 3)],
    "offset after num_occurrences": [field_varint(5, 3) + _event()],
    "missing fields": [b"", field_varint(1, 1), field_varint(2, 77)],
    "unknown fields": [_event(first=field_varint(99, 1) + tag(98, 1) + b"12345678",
                              last=field_bytes(97, b"xx") + tag(96, 5) + b"1234"
                              + tag(95, 3) + field_varint(1, 1) + tag(95, 4))],
    "known field, wrong wire type": [_event(last=field_bytes(1, b"\x05") + tag(4, 0) + b"\x01")],
    "repeated singular field: last wins": [_event() + field_varint(1, 3) + field_varint(3, 9)],
    "stat value types in string columns": [
        _event(stats=_stat(1, 5, "inline_op") + _stat(4, 4, -3) + _stat(5, 6, b"\x00\xff")),
        _event(stats=_stat(1, 2, 1.5) + _stat(4, 3, 2**64 - 1) + _stat(5, 0, None)),
        _event(stats=_stat(1, 7, 12345) + _stat(4, 7, 10))],
    "inline strings beside bytes of another column": [
        _event(stats=_stat(1, 5, "op.1") + _stat(5, 6, b"\x00\xff")),
        _event(stats=_stat(1, 5, "op.2") + _stat(4, 5, "op.1"))],
    "stat value types in integer columns": [
        _event(stats=_stat(2, 7, 8) + _stat(3, 2, 2.75) + _stat(6, 5, "12") + _stat(7, 6, b"1")),
        _event(stats=_stat(2, 3, 2**63) + _stat(3, 4, -(2**63)) + _stat(7, 3, 5)),
        _event(stats=_stat(2, 4, 1) + _stat(3, 0, None))],
    "stat oneof: last value wins": [_event(stats=field_bytes(4, field_varint(1, 1) + field_bytes(
        5, b"a") + field_varint(7, 8) + field_varint(1, 3) + field_varint(4, 6)))],
    "repeated stat: last wins": [_event(stats=_stat(1, 7, 8) + _stat(1, 7, 9) + _stat(1, 0, 0))],
    "unknown stat and event metadata": [_event(md=42, stats=_stat(123, 4, 5) + _stat(3, 7, 999))],
    "negative durations": [_event(dur=-5), _event(md=2), _event(md=42, dur=-1)],
    "negative offsets": [_event(off=-1), _event(off=-999_999, dur=3), _event(off=-1001)],
    "memcpy": [_event(md=2, stats=_stat(5, 7, 10)), _event(md=3, stats=_stat(5, 5, "size:12"))],
    "empty event": [b""],
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_wire_format_edge_cases(tmp_path: Path, name: str) -> None:
    events = EDGE_CASES[name]
    for line_name, ts in (("Stream #7", 5), ("Stream #7(MemcpyH2D)", 1_700_000_000_000_000_000),
                          ("Stream #7(Memset)", -3)):
        p = tmp_path / f"{line_name[:9]}{ts}.xplane.pb"
        p.write_bytes(_space_with(events, line_name=line_name, ts=ts))
        assert_same(p)


def test_ids_on_both_sides_of_the_direct_lookup(tmp_path: Path) -> None:
    """Event metadata ids below 2^15 and stat metadata ids below 2^13 are looked up by index
    in the C decoder, larger ones hashed (``idmap_init_direct``): ids at, below and far
    above each bound, named or not, as event, stat and reference ids on one line, read as
    the per-event reader reads them."""
    big = 2**40
    events = [_event(md=32767, stats=_stat(8191, 7, 8192) + _stat(2, 4, 11)),
              _event(md=32768, stats=_stat(8192, 7, 8191) + _stat(big, 4, 77)),
              _event(md=big, stats=_stat(8191, 7, big + 1) + _stat(8193, 5, "inline")),
              _event(md=32769, stats=_stat(8191, 7, 8190)),  # an unnamed event metadata id
              _event(md=1, stats=_stat(8191, 7, 3) + _stat(2, 4, 12))]
    space = xspace_class()()
    space.ParseFromString(_space_with(events))
    plane = space.planes[0]
    for i, name in ((32767, "below"), (32768, "at"), (big, "far above")):
        plane.event_metadata[i].id = i
        plane.event_metadata[i].name = name
    for i, name in ((8190, "ref.below"), (8191, "hlo_op"), (8192, "hlo_module"),
                    (8193, "memcpy_details"), (big, "correlation_id"), (big + 1, "ref.far")):
        plane.stat_metadata[i].id = i
        plane.stat_metadata[i].name = name
    p = tmp_path / "ids.xplane.pb"
    p.write_bytes(space.SerializeToString())
    trace = assert_same(p)
    assert trace.events.height == 5  # type: ignore[attr-defined]


_LINE_NAMES = ("Stream #8", "Stream #9", "Stream #10", "Stream #11(MemcpyH2D)",
               "Stream #12(MemcpyH2D)", "Other line", "Stream #13(Memset)")


@pytest.mark.parametrize("rotate", range(3))
def test_stream_lines_of_a_plane_read_together(tmp_path: Path, rotate: int) -> None:
    """The C source reads a plane's stream lines as one frame per run of equal line types,
    their per-line tables (metadata ids, interned and inline strings, bytes) laid end to end:
    every line keeps its own values, kinds and stream, as the per-event reader reads them."""
    cases = sorted(EDGE_CASES)
    md_stats = {1: [_stat_body(1, 7, 8), _stat_body(3, 4, 17)], 3: [_stat_body(4, 5, "m")]}
    lines = b""
    for k, case in enumerate(cases):
        name = _LINE_NAMES[(k + 3 * rotate) % len(_LINE_NAMES)]
        lines += field_bytes(3, field_varint(1, 20 + k) + field_bytes(2, name.encode())
                             + field_varint(3, 5 + 1000 * k)
                             + b"".join(field_bytes(4, e) for e in EDGE_CASES[case]))
    p = tmp_path / "lines.xplane.pb"
    p.write_bytes(_space_with(EDGE_CASES["memcpy"], plane_extra=lines, md_stats=md_stats))
    trace = assert_same(p)
    assert not isinstance(trace, TraceInputError)
    assert trace.events["stream"].n_unique() > 10  # most lines kept rows


def _gpu_plane(ordinal: int, names: list[str], stats: list[str], lines: bytes,
               md_stats: dict[int, list[bytes]] | None = None) -> bytes:
    """A serialized GPU plane: event metadata ids 1.. named ``names``, stat metadata ids 1..
    named ``stats``, default stats ``md_stats``, and the serialized lines ``lines``."""
    plane = xspace_class()().planes.add(id=ordinal, name=f"/device:GPU:{ordinal}")
    for i, name in enumerate(names, start=1):
        plane.event_metadata[i].id = i
        plane.event_metadata[i].name = name
    for i, name in enumerate(stats, start=1):
        plane.stat_metadata[i].id = i
        plane.stat_metadata[i].name = name
    for mid, bodies in (md_stats or {}).items():
        plane.event_metadata[mid].MergeFromString(b"".join(field_bytes(5, b) for b in bodies))
    return plane.SerializeToString() + lines


@pytest.mark.parametrize("frame_rows", [1, 4, xspace_native.FRAME_ROWS])
def test_small_lines_of_several_planes_read_together(tmp_path: Path, frame_rows: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Small stream lines of several GPU planes become one frame in the C source (several
    with a smaller bound of rows): each line keeps its own plane's names, stat ids, interned
    strings and default stats (the same ids mean other things on each plane here)."""
    monkeypatch.setattr(xspace_native, "FRAME_ROWS", frame_rows)
    def line(line_id: int, name: str, events: list[bytes]) -> bytes:
        return field_bytes(3, field_varint(1, line_id) + field_bytes(2, name.encode())
                           + field_varint(3, 5) + b"".join(field_bytes(4, e) for e in events))

    events = [_event(stats=_stat(1, 7, 8) + _stat(2, 4, 11)), _event(md=2),
              _event(md=3, stats=_stat(3, 7, 9) + _stat(4, 5, "inline")), _event(md=1, dur=-2)]
    first = _gpu_plane(0, ["fusion.1.kd", "MemcpyHtoD", "gemm"],
                       ["hlo_op", "correlation_id", "hlo_module", "program_id",
                        "fusion.1", "jit_a", "size:64"],
                       line(1, "Stream #1", events) + line(2, "Stream #2", events[:2]))
    second = _gpu_plane(1, ["gemm_b", "loop_add", "MemsetD32"],
                        ["program_id", "hlo_module", "jit_b", "hlo_op", "x", "y", "op.b",
                         "correlation_id"],
                        line(3, "Stream #3", events)  # (a line repeating another whole
                        + line(4, "Stream #4(Memset)", events[1:])  # is read once: not here)
                        + line(5, "Stream #5", events[2:]),
                        md_stats={2: [_stat_body(4, 7, 7), _stat_body(1, 4, 5)]})
    p = tmp_path / "planes.xplane.pb"
    p.write_bytes(field_bytes(1, first) + field_bytes(1, second) + field_bytes(4, b"host0"))
    trace = assert_same(p)
    assert not isinstance(trace, TraceInputError)
    assert trace.events.group_by("device").len().sort("device")["len"].to_list() == [5, 6]


def test_event_metadata_default_stats(tmp_path: Path) -> None:
    # defaults: metadata 1 carries hlo_op and program_id; metadata 3 a uint64 correlation id
    md_stats = {1: [_stat_body(1, 7, 8), _stat_body(3, 4, 17)],
                3: [_stat_body(2, 3, 2**64 - 2), _stat_body(4, 5, "m")]}
    events = [_event(md=1), _event(md=1, stats=_stat(1, 7, 9)), _event(md=3),
              _event(md=3, stats=_stat(2, 0, None)), _event(md=2)]
    p = tmp_path / "defaults.xplane.pb"
    p.write_bytes(_space_with(events, md_stats=md_stats,
                              host_events=[_event(md=1, stats=_stat(2, 3, 5)), _event(md=1)]))
    assert_same(p)


def test_host_plane_filtering_keeps_what_is_read(tmp_path: Path) -> None:
    """Host lines: only events with a wanted stat (or defaults) become rows, but dropped and
    unnamed events of every line are still counted."""
    host = [_event(md=1, stats=_stat(2, 3, i)) for i in range(5)]
    host += [_event(md=9), _event(md=1, dur=-3), _event(md=1, stats=_stat(7, 4, 2)),
             _event(md=1, stats=_stat(2, 7, 1))]
    p = tmp_path / "host.xplane.pb"
    p.write_bytes(_space_with([_event()], host_events=host))
    trace = assert_same(p)
    assert trace.host_events.height == 6 and trace.steps.height == 1  # 5 launches, 1 step


# ---------------------------------------------------------------------------------------------
# Corrupt input: both decoders refuse the same files; the C one never crashes
# ---------------------------------------------------------------------------------------------

def _fuzz_base() -> bytes:
    acts = [Activity(d, 1 + i % 2, f"loop_add_fusion_{i}.kd", i * 100, 50,
                     {"hlo_op": f"f.{i}", "correlation_id": i, "program_id": 3})
            for i in range(30) for d in (0, 1)]
    return build_xspace(acts, steps=[(0, 0, 2000), (1, 2000, 4000)],
                        cpu_ops=[(5, 0, "dot.1", 10, 20)])


def mutated(blob: bytearray, data: st.DataObject, least: int, most: int,
            ops: list[str]) -> bytearray:
    """``blob`` after ``least`` to ``most`` drawn edits: a byte set, a bit flipped, a byte
    inserted or deleted (``ops``: the edits to draw from, repeated to weigh them)."""
    for _ in range(data.draw(st.integers(least, most))):
        i = data.draw(st.integers(0, len(blob) - 1))
        op = data.draw(st.sampled_from(ops))
        if op == "set":
            blob[i] = data.draw(st.integers(0, 255))
        elif op == "bit":
            blob[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "insert":
            blob[i:i] = bytes([data.draw(st.integers(0, 255))])
        elif len(blob) > 1:
            del blob[i]
    return blob


@settings(max_examples=250, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_files_same_outcome(tmp_path: Path, data: st.DataObject) -> None:
    """Truncations, byte flips, inserted and deleted bytes: either both decoders refuse the
    file (TraceInputError) or both give the same Trace."""
    blob = bytearray(_fuzz_base())
    blob = mutated(blob[:data.draw(st.integers(1, len(blob)))], data, 0, 5,
                   ["set", "set", "insert", "delete", "bit"])
    p = tmp_path / "fuzz.xplane.pb"
    p.write_bytes(bytes(blob))
    assert_same(p)


def test_deep_group_nesting_limit(tmp_path: Path) -> None:
    """upb allows 100 nested messages/groups; so does the C decoder, inside events too."""
    for depth in (95, 96, 97, 98, 120):
        ev = _event(last=b"\x53" * depth + b"\x54" * depth)
        p = tmp_path / f"deep{depth}.xplane.pb"
        p.write_bytes(_space_with([ev]))
        assert_same(p)


def test_bad_utf8_in_string_stat_is_refused(tmp_path: Path) -> None:
    for bad in (b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\xe2\x82"):
        p = tmp_path / "utf8.xplane.pb"
        p.write_bytes(_space_with([_event(stats=_stat(1, 5, bad))]))
        assert isinstance(assert_same(p), TraceInputError)
    p.write_bytes(_space_with([_event(stats=_stat(1, 5, "é€😀".encode()))]))
    assert not isinstance(assert_same(p), TraceInputError)


def test_corrupt_dropped_line_is_still_an_error(tmp_path: Path) -> None:
    """Lines the reader does not need (a non-stream line) are checked byte by byte too."""
    good = _space_with([_event()], line_name="XLA Ops")
    bad = good.replace(field_varint(2, 1000), b"\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")
    assert bad != good
    p = tmp_path / "bad.xplane.pb"
    p.write_bytes(bad)
    assert isinstance(assert_same(p), TraceInputError)


def test_c_functions_survive_random_bytes() -> None:
    """The extension's entry points on arbitrary bytes: a result or ValueError, never a
    crash; every loop ends."""
    c = xspace_native.extension()
    rng = random.Random(8)
    base = _fuzz_base()
    for i in range(3000):
        if i % 3 == 0:
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        else:
            blob = bytearray(base)
            for _ in range(rng.randrange(1, 8)):
                blob[rng.randrange(len(blob))] = rng.randrange(256)
            blob = bytes(blob[:rng.randrange(1, len(blob) + 1)])
        for fn, args in ((c.scan, (blob,)), (c.validate, (blob, 0, len(blob))),
                         (c.decode, (blob, 0, len(blob), rng.randrange(-2**40, 2**40),
                                     {1: 0, 2: 1, 3: 6}, 7, {1, 2}, bool(i % 2)))):
            try:
                fn(*args)
            except ValueError:
                pass


def test_c_arguments_are_checked() -> None:
    c = xspace_native.extension()
    with pytest.raises(ValueError):
        c.decode(b"", 5, 1, 0, {}, 7, None, False)
    with pytest.raises(ValueError):
        c.validate(b"abc", 1, 10)
    with pytest.raises(ValueError):
        c.decode(b"", 0, 0, 0, {1: 9}, 7, None, False)
    with pytest.raises(TypeError):
        c.decode(b"", 0, 0, 0, {}, 7, [1], False)


def test_timestamps_out_of_range_are_an_input_error(tmp_path: Path) -> None:
    p = tmp_path / "far.xplane.pb"
    p.write_bytes(_space_with([_event(off=2**62, dur=2**62)], ts=2**63 - 10))
    for decoder in ("c", "python"):  # the per-event reader raised a polars TypeError
        with pytest.raises(TraceInputError, match="out of the int64 nanosecond range"):
            xspace_reader.read(p, decoder=decoder)
    # in filter mode too (host lines), for an event it does not keep (no wanted stat), as
    # the per-event reader checks every event of the lines it reads
    raw = p.read_bytes()
    c = xspace_native.extension()
    _, lines, _ = c.scan(raw)
    (_, _, off, length, _), *_ = lines
    with pytest.raises(ValueError, match="int64 nanosecond range"):
        c.decode(raw, off, length, 2**63 - 10, {}, 7, None, True)


@pytest.mark.parametrize("ts, off, dur", [
    (5, 2**63 - 1000, 5000),            # offset + duration past int64: both times fit
    (5, -(2**63), 0),                   # the smallest offset
    (2**63 - 10, 9000, 999),            # the end at INT64_MAX exactly
    (2**63 - 10, 9000, 1000),           # the end one ns past it: refused
    (-(2**63) + 5, -5000, 10),          # the start at INT64_MIN exactly
    (-(2**63) + 5, -5001, 10),          # floored one ns below it: refused
    (-3, -999_999, 3), (7, -1, 1), (0, 999, 1)])
def test_event_times_at_the_edges_of_int64(tmp_path: Path, ts: int, off: int, dur: int
                                           ) -> None:
    """The C decoder's event times (int64 arithmetic, 128 bits when offset + duration
    overflows) equal the per-event reader's, or both refuse the file."""
    p = tmp_path / "edge.xplane.pb"
    p.write_bytes(_space_with([_event(off=off, dur=dur, stats=_stat(2, 4, 1))], ts=ts))
    assert_same(p)
    # the decoder's own columns (the reader drops some of these events later on)
    start, end = ts + off // 1000, ts + (off + dur) // 1000  # exact: Python's floor division
    raw = p.read_bytes()
    c = xspace_native.extension()
    _, lines, _ = c.scan(raw)
    (_, _, at, length, _), *_ = lines
    if -(2**63) <= start < 2**63 and -(2**63) <= end < 2**63:
        got = c.decode(raw, at, length, ts, {}, 7, None, False)
        assert struct.unpack("<qq", got["start_ns"] + got["end_ns"]) == (start, end)
    else:
        with pytest.raises(ValueError, match="int64 nanosecond range"):
            c.decode(raw, at, length, ts, {}, 7, None, False)


def test_varints_of_every_length(tmp_path: Path) -> None:
    """Offsets, durations and stat values of 1 to 10 bytes on the wire, the longest and the
    shortest of each length, anywhere in an event (the C decoder reads up to 8 bytes as one
    word when the event has that many left, else byte by byte): what the per-event reader
    reads, and the decoder's own times exact."""
    values = sorted({v for n in range(1, 11) for v in (2 ** (7 * (n - 1)), 2 ** (7 * n) - 1)
                     if v < 2**63})
    events = [_event(off=v, dur=w, stats=_stat(2, 4, v) + _stat(3, 3, w))
              for v, w in zip(values, reversed(values))]
    events += [_event(off=-v, dur=1) for v in values[:6]]  # negative int64: 10 bytes
    p = tmp_path / "varints.xplane.pb"
    p.write_bytes(_space_with(events, ts=0))
    assert_same(p)
    raw = p.read_bytes()
    c = xspace_native.extension()
    _, lines, _ = c.scan(raw)
    (_, _, at, length, _), *_ = lines
    got = c.decode(raw, at, length, 0, {2: 0}, 7, None, False)
    n = len(events)
    starts = struct.unpack(f"<{n}q", got["start_ns"])
    ends = struct.unpack(f"<{n}q", got["end_ns"])
    want = [(v // 1000, (v + w) // 1000) for v, w in zip(values, reversed(values))]
    want += [(-v // 1000, (-v + 1) // 1000) for v in values[:6]]
    assert list(zip(starts, ends)) == want
    assert struct.unpack(f"<{len(values)}q", got["vals"][0][:8 * len(values)]) == tuple(values)


# ---------------------------------------------------------------------------------------------
# Which decoder ran
# ---------------------------------------------------------------------------------------------

def test_fallback_is_not_silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
    fast = xspace_reader.read(p)
    from parsers.xspace import native

    monkeypatch.setattr(native, "_c", None)
    monkeypatch.setattr(native, "_IMPORT_ERROR", "not built (test)")
    slow = xspace_reader.read(p)
    assert decoders(slow.meta) == {str(p): "python"}
    assert decoders(fast.meta) == {str(p): "c"}
    assert slow.meta.warnings[-1].endswith("read with the slow pure-Python XSpace reader: "
                                           "not built (test)")
    assert slow.meta.warnings[:-1] == fast.meta.warnings
    assert_frame_equal(slow.events, fast.events)


def test_environment_forces_the_python_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    p = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
    monkeypatch.setenv(xspace_native.ENV, "python")
    trace = xspace_reader.read(p)
    assert decoders(trace.meta) == {str(p): "python"}
    assert not any("slow" in w for w in trace.meta.warnings)


def test_load_records_the_decoder_of_every_file() -> None:
    import tracelens

    run = next((SAMPLES / "mi355x_2x8gpu_straggler").rglob("*.xplane.pb")).parent
    trace = tracelens.load(run)
    assert sorted(decoders(trace.meta)) == sorted(str(p) for p in
                                                        run.glob("*.xplane.pb"))
    assert set(decoders(trace.meta).values()) == {"c"}


def test_scale_knob_trace_identical(tmp_path: Path) -> None:
    """A few thousand events per device with host launches and steps, both decoders."""
    from tracelens_dev.synth import scaled

    sc = replace(scaled(Scenario(device="mi355x", gpus=2, layers=2, seed=3), 3000),
                 host_launches=True)
    p = tmp_path / "scaled.xplane.pb"
    write(build(sc, truth=False).trace, p)
    trace = assert_same(p)
    assert trace.events.height >= 6000 and trace.host_events.height >= 6000


def test_varint_helper_roundtrip() -> None:  # the test builders' own encoding
    assert varint(300) == b"\xac\x02" and tag(4, 2) == b"\x22"
