"""Event metadata map entries the C decoder's ``scan`` cuts out of the skeleton
(``parsers/_xspace.c``: ``md_simple``, ``plan_cuts``, ``event_metadata``) read exactly as the
protobuf runtime (upb) and ``PlaneReader`` read them from the whole map: the same names and
default stats, and the same files refused. Hand-made maps (duplicated keys, stats of every
kind, unknown fields, wrong wire types, bad UTF-8, key order), generated ones, and byte
mutations of a metadata-heavy file."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers.xplane_schema import xspace_class
from parsers.xspace import native as xspace_native
from parsers.xspace.columns import EVENT_STATS
from parsers.xspace.planes import PlaneReader
from parsers.xspace.space import parse
from tests.test_xspace_decode import assert_same, mutated
from tracelens.core.errors import TraceInputError
from tracelens_dev.writers.xspace_encode import field_bytes, field_varint, tag, varint

pytestmark = pytest.mark.skipif(not xspace_native.available(),
                                reason=f"C decoder not built: "
                                       f"{xspace_native.unavailable_reason()}")

# stat metadata of the test planes: 1-7 the stats the reader reads, 8-9 interned strings, 10
# a stat it does not read; and -1 an interned string no ref value names (refs are uint64)
STAT_NAMES = ["hlo_op", "correlation_id", "program_id", "hlo_module", "memcpy_details",
              "device_ordinal", "step_num", "fusion.1", "jit_step", "not_read"]


def stat(md: int, field: int | None = None, value: Any = None, extra: bytes = b"") -> bytes:
    """One XStat body: metadata id and one value member (None: no value)."""
    body = field_varint(1, md)
    if field == 2:
        body += tag(2, 1) + struct.pack("<d", value)
    elif field in (5, 6):
        body += field_bytes(field, value if isinstance(value, bytes) else value.encode())
    elif field is not None:
        body += field_varint(field, value)
    return body + extra


def md(name: str | bytes | None = None, stats: list[bytes] = (), extra: bytes = b"",
       **fields: Any) -> bytes:
    """One XEventMetadata body (id 1, name 2, metadata 3, display_name 4, stats 5)."""
    body = b""
    if "id" in fields:
        body += field_varint(1, fields["id"])
    if name is not None:
        body += field_bytes(2, name if isinstance(name, bytes) else name.encode())
    if "metadata" in fields:
        body += field_bytes(3, fields["metadata"])
    if "display_name" in fields:
        d = fields["display_name"]
        body += field_bytes(4, d if isinstance(d, bytes) else d.encode())
    return body + b"".join(field_bytes(5, s) for s in stats) + extra


def entry(key: int | None, value: bytes | None, extra: bytes = b"",
          key_last: bool = False) -> bytes:
    """One event_metadata map entry body (key 1, value 2)."""
    k = b"" if key is None else field_varint(1, key)
    v = b"" if value is None else field_bytes(2, value)
    return (v + k if key_last else k + v) + extra


def _stat_metadata() -> bytes:
    names = list(enumerate(STAT_NAMES, start=1)) + [(-1, "negative id")]
    return b"".join(field_bytes(5, field_varint(1, i) + field_bytes(
        2, field_varint(1, i) + field_bytes(2, n.encode()))) for i, n in names)


def _event(mid: int, off: int) -> bytes:
    return field_varint(1, mid) + field_varint(2, off) + field_varint(3, 500)


def plane(entries: list[bytes], name: str = "/device:GPU:0", name_last: bool = False,
          event_ids: list[int] = (0, 1, 2, 3, 4, 5, 6, -1, 99)) -> bytes:
    """An XPlane field of the XSpace: the map entries, stat metadata, and one stream line
    with an event per id of ``event_ids`` (so the whole reader resolves their names)."""
    n = field_bytes(2, name.encode())
    body = b"" if name_last else n
    body += b"".join(field_bytes(4, e) for e in entries) + _stat_metadata()
    line = field_varint(1, 7) + field_bytes(2, b"Stream #7") + field_varint(3, 5) + b"".join(
        field_bytes(4, _event(m, 1000 * i)) for i, m in enumerate(event_ids))
    body += field_bytes(3, line)
    return field_bytes(1, body + (n if name_last else b""))


def space(*planes: bytes) -> bytes:
    host = plane([entry(1, md("hipLaunchKernel", [stat(2, 3, 5)])),
                  entry(2, md("ann"))], name="/host:CPU", event_ids=[1, 2, 3])
    return b"".join(planes) + host + field_bytes(4, b"host0")


def _typed(d: dict[int, Any]) -> dict[int, tuple[str, str]]:
    return {k: (type(v).__name__, repr(v)) for k, v in d.items()}


def _summary(r: PlaneReader) -> tuple:
    return (r.event_names, [_typed(d) for d in r.by_code],
            {k: [(type(v).__name__, repr(v)) for v in vals] for k, vals in r.defaults.items()},
            r.wanted_ids())


def readers_both(raw: bytes, path: Path = Path("t.xplane.pb")) -> tuple[Any, Any]:
    """Per plane, what PlaneReader resolves from the whole map (upb) and from the skeleton
    plus the cut entries (C), every byte checked; or "refused" for a refused file."""
    try:
        full = [_summary(PlaneReader(p)) for p in parse(raw, path).planes]
    except TraceInputError:
        full = "refused"
    try:
        sk, src = xspace_native.split(raw, path)
        cut = [_summary(PlaneReader(p, src.cut_metadata(i))) for i, p in enumerate(sk.planes)]
        src.finish()
    except TraceInputError:
        cut = "refused"
    return full, cut


def cut_keys(raw: bytes) -> list[list[int] | None]:
    """Per plane, the keys of the entries scan cut (None: none)."""
    _, _, cut = xspace_native.extension().scan(raw, xspace_native.WHOLE_PLANES)
    return [None if c is None else np.frombuffer(c, np.int64)[0::3].tolist() for c in cut]


def check(tmp_path: Path, raw: bytes, whole_reader: bool = True) -> Any:
    full, cut = readers_both(raw)
    assert full == cut
    if whole_reader:
        p = tmp_path / "m.xplane.pb"
        p.write_bytes(raw)
        assert_same(p)
    return full


# ---------------------------------------------------------------------------------------------
# What scan cuts
# ---------------------------------------------------------------------------------------------

def test_scan_cuts_plain_entries_and_keeps_the_rest(tmp_path: Path) -> None:
    entries = [entry(1, md("gemm")),                                   # a name: cut
               entry(2, md("fusion.1.kd", [stat(1, 7, 8), stat(3, 4, 17)])),  # stats: cut
               entry(3, md("child", extra=field_varint(6, 9))),        # child_id: kept
               entry(4, md("unknown", extra=field_varint(99, 1))),     # unknown field: kept
               entry(5, md("stat unknown", [stat(1, 7, 8, extra=field_varint(42, 1))])),
               entry(6, md("entry unknown"), extra=field_varint(3, 1))]  # upb drops it
    raw = space(plane(entries))
    assert cut_keys(raw) == [[1, 2], [1, 2]]  # the host plane's two plain entries too
    skeleton, _, _ = xspace_native.extension().scan(raw, xspace_native.WHOLE_PLANES)
    sk = parse(skeleton, Path("t"))
    assert sorted(sk.planes[0].event_metadata) == [3, 4, 5]  # 6 is dropped by upb itself
    assert sorted(parse(raw, Path("t")).planes[0].event_metadata) == [1, 2, 3, 4, 5]
    full = check(tmp_path, raw)
    names, by_code, defaults, _ = full[0]
    assert names == {1: "gemm", 2: "fusion.1.kd", 3: "child", 4: "unknown", 5: "stat unknown"}
    assert defaults[2][EVENT_STATS.index("hlo_op")] == ("str", "'fusion.1'")
    assert defaults[2][EVENT_STATS.index("program_id")] == ("int", "17")


def test_scan_leaves_host_metadata_whole(tmp_path: Path) -> None:
    """``/host:metadata`` (the plane named last wins, as in protobuf) keeps its map: the
    modules are listed in the map's order."""
    mods = [entry(1, md("jit_a(1)")), entry(2, md("jit_b(2)"))]
    raw = space(plane(mods, name="/host:metadata"),
                plane(mods, name="/host:metadata", name_last=True),
                plane(mods, name="/host:metadata2"))
    assert cut_keys(raw)[:3] == [None, None, [1, 2]]
    check(tmp_path, raw)
    renamed = field_bytes(1, field_bytes(2, b"/host:metadata") + field_bytes(4, mods[0])
                          + field_bytes(2, b"/device:GPU:1"))
    assert cut_keys(renamed) == [[1]]
    value = md("jit_a(1)")  # the table: key, offset and length of the XEventMetadata
    assert xspace_native.extension().scan(renamed)[2] == [
        struct.pack("<3q", 1, renamed.index(value), len(value))]


def test_module_order_of_host_metadata_is_kept(tmp_path: Path) -> None:
    """``reader._read_modules`` reads the map of ``/host:metadata`` itself, and lists modules
    of no program id in the map's order, upb's hash order, which depends on every entry of
    the map (without the stat-less ones, these four come in another order): the plane is left
    whole, so the C decoder lists the same modules in the same order."""
    s = xspace_class()()
    p = s.planes.add(name="/host:metadata")
    p.stat_metadata[1].name = "Hlo Proto"
    for k in range(1, 101):
        p.event_metadata[k].name = f"f{k}"
    for k in (1000, 70, 5000, 3000000):
        p.event_metadata[k].name = f"module_{k}"
        p.event_metadata[k].stats.add(metadata_id=1, bytes_value=b"x")
    raw = space(s.SerializeToString(), plane([entry(1, md("gemm"))]))
    assert cut_keys(raw)[0] is None
    path = tmp_path / "modules.xplane.pb"
    path.write_bytes(raw)
    trace = assert_same(path)
    in_map = [f"module_{k}" for k, v in parse(raw, path).planes[0].event_metadata.items()
              if v.stats]
    assert trace.modules["module"].to_list() == in_map


DUPLICATES = {
    "two plain entries": [entry(1, md("a")), entry(1, md("b"))],
    "plain then with stats": [entry(1, md("a")), entry(1, md("b", [stat(1, 7, 8)]))],
    "plain then kept": [entry(1, md("a")), entry(1, md("b", extra=field_varint(6, 1)))],
    "kept then plain": [entry(1, md("a", extra=field_varint(6, 1))), entry(1, md("b"))],
    "plain then dropped by upb": [entry(1, md("a")), entry(1, md("b"), extra=field_varint(9, 1))],
    "dropped by upb then plain": [entry(1, md("a"), extra=field_varint(9, 1)), entry(1, md("b"))],
    "missing keys": [entry(None, md("a")), entry(None, md("b")), entry(2, md("c"))],
    "missing key and key 0": [entry(0, md("a")), entry(None, md("b"))],
    "one key in two varint encodings": [entry(1, md("a")),
                                        tag(1, 0) + b"\x81\x00" + field_bytes(2, md("b"))],
}


@pytest.mark.parametrize("name", sorted(DUPLICATES))
def test_duplicated_keys_cut_nothing_and_read_like_upb(tmp_path: Path, name: str) -> None:
    raw = space(plane(DUPLICATES[name] + [entry(5, md("other"))]))
    assert cut_keys(raw)[0] is None
    check(tmp_path, raw)


# ---------------------------------------------------------------------------------------------
# Edge cases of the wire format: the same names, stats and refusals
# ---------------------------------------------------------------------------------------------

EDGE_CASES = {
    "key after value": [entry(1, md("a"), key_last=True)],
    "missing key": [entry(None, md("zero"))],
    "negative keys": [entry(-1, md("m1")), entry(-(2**63), md("min")), entry(2**63 - 1, md("max"))],
    "two key fields": [entry(1, md("a"), extra=field_varint(1, 2))],
    "key of another wire type": [entry(None, md("a"), extra=field_bytes(1, varint(1))),
                                 entry(2, md("b"))],
    "key as fixed64": [entry(None, md("a"), extra=tag(1, 1) + struct.pack("<q", 3)),
                       entry(3, md("b"))],
    "missing value": [entry(1, None), entry(2, md("b"))],
    "two value fields": [entry(1, md("a")) + field_bytes(2, md(stats=[stat(1, 7, 8)])),
                         entry(2, md("b"))],
    "empty value and empty entry": [entry(1, b""), b"", entry(2, md("b"))],
    "missing name": [entry(1, md(None, [stat(3, 4, 1)])), entry(2, md())],
    "repeated name: last wins": [entry(1, md("a") + field_bytes(2, b"b") + field_bytes(2, b"c"))],
    "display name, metadata bytes, id": [
        entry(1, md("a", display_name="A\u00e9", metadata=b"\xff\x00", id=77)),
        entry(2, md("b", id=-5) + field_varint(1, 3))],
    "non-ASCII names": [entry(1, md("\u00e9\u20ac\U0001F600 k")), entry(2, md(b""))],
    "name of another wire type": [entry(1, md(None, extra=field_varint(2, 5))),
                                  entry(2, md("b"))],
    "stats of another wire type": [entry(1, md("a", extra=field_varint(5, 1))),
                                   entry(2, md("b"))],
    "child_id unpacked and packed": [entry(1, md("a", extra=field_varint(6, 3))),
                                     entry(2, md("b", extra=field_bytes(6, varint(3) + varint(4)))),
                                     entry(3, md("c"))],
    "unknown fields in the value": [entry(1, md("a", extra=field_bytes(9, b"x") + tag(8, 5)
                                                + b"1234" + tag(7, 3) + tag(7, 4))),
                                    entry(2, md("b"))],
    "unknown group in the entry": [entry(1, md("a"), extra=tag(5, 3) + tag(5, 4)),
                                   entry(2, md("b"))],
    "stats of every value kind": [
        entry(1, md("i64", [stat(2, 4, -3), stat(3, 4, 2**63 - 1), stat(6, 4, 0)])),
        entry(2, md("u64", [stat(2, 3, 2**64 - 1), stat(3, 3, 2**63), stat(7, 3, 4)])),
        entry(3, md("dbl", [stat(3, 2, 2.5), stat(2, 2, float("nan")), stat(6, 2, -0.0)])),
        entry(4, md("str", [stat(1, 5, "op.\u00e9"), stat(4, 5, ""), stat(5, 6, b"\x00\xff")])),
        entry(5, md("ref", [stat(1, 7, 8), stat(4, 7, 9), stat(5, 7, 99), stat(2, 7, 2**64 - 1),
                            stat(7, 7, 2**63 + 8)])),
        entry(6, md("none", [stat(1), stat(3)]))],
    "the last stat of a code wins": [
        entry(1, md("a", [stat(1, 7, 8), stat(1, 5, "later")])),
        entry(2, md("b", [stat(3, 4, 5), stat(3)])),
        entry(3, md("c", [stat(1, 5, "x"), stat(1, 7, 12345)])),  # a dangling ref: None
        entry(4, md("d", [stat(3, 4, 5), stat(1, 5, "y"), stat(3, 3, 6)]))],
    "stat value members: the last wins": [
        entry(1, md("a", [field_varint(1, 1) + field_bytes(5, b"s") + field_varint(7, 8)
                          + field_varint(4, 3) + field_varint(1, 3)]))],
    "stats the reader does not read": [entry(1, md("a", [stat(10, 4, 1), stat(77, 5, "x"),
                                                         stat(0, 4, 2)]))],
    "stat with an unknown field": [entry(1, md("a", [stat(1, 5, "x", extra=field_varint(8, 1))])),
                                   entry(2, md("b", [stat(1, 5, "y")]))],
    "stat value of another wire type": [
        entry(1, md("a", [field_varint(1, 1) + field_varint(5, 1)])),
        entry(2, md("b", [stat(1, 5, "y")]))],
    "bytes metadata need no UTF-8": [entry(1, md("a", metadata=b"\xff\xfe"))],
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_metadata_edge_cases_like_upb(tmp_path: Path, name: str) -> None:
    full = check(tmp_path, space(plane(EDGE_CASES[name])))
    assert full != "refused"


BAD_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\xe2\x82"]


@pytest.mark.parametrize("where", ["name", "display_name", "str stat"])
def test_bad_utf8_in_metadata_is_refused(tmp_path: Path, where: str) -> None:
    for bad in BAD_UTF8:
        value = md(bad) if where == "name" else md("a", display_name=bad) \
            if where == "display_name" else md("a", [stat(1, 5, bad)])
        raw = space(plane([entry(1, md("ok")), entry(2, value)]))
        assert check(tmp_path, raw) == "refused"


# ---------------------------------------------------------------------------------------------
# Generated maps and mutated bytes
# ---------------------------------------------------------------------------------------------

_STAT = st.one_of(
    st.builds(stat, st.integers(0, 11)),
    st.builds(stat, st.integers(0, 11), st.sampled_from([3, 4, 7]),
              st.sampled_from([0, 1, 8, 9, 2**63, 2**64 - 1])),
    st.builds(stat, st.integers(0, 11), st.just(2), st.sampled_from([0.5, -0.0])),
    st.builds(stat, st.integers(0, 11), st.just(5), st.sampled_from(["v", "", "\u00e9"])),
    st.builds(stat, st.integers(0, 11), st.just(6), st.sampled_from([b"\xff", b""])),
    st.builds(stat, st.integers(0, 11), st.just(5), st.just(b"\xff")),  # refused
    st.builds(stat, st.integers(0, 11), st.just(4), st.just(1), st.just(field_varint(9, 1))))
_EXTRA = st.sampled_from([b"", b"", b"", field_varint(6, 1), field_varint(9, 1),
                          field_bytes(2, b"again"), field_varint(1, 4), field_varint(2, 1)])


@st.composite
def _entries(draw: st.DrawFn) -> list[bytes]:
    out = []
    for _ in range(draw(st.integers(0, 6))):
        key = draw(st.sampled_from([None, 0, 1, 2, 3, 4, 5, -1, 2**40]))
        name = draw(st.sampled_from([None, "k", "", "\u00e9", b"\xff"]))
        value = None if draw(st.integers(0, 15)) == 0 else md(
            name, draw(st.lists(_STAT, max_size=3)), draw(_EXTRA))
        extra = draw(st.sampled_from([b"", b"", b"", field_varint(7, 1),
                                      field_bytes(1, b"\x01"), field_varint(1, 3)]))
        out.append(entry(key, value, extra, key_last=draw(st.booleans())))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=_entries(), host=_entries(), whole=st.booleans())
def test_generated_maps_read_like_upb(gpu: list[bytes], host: list[bytes], whole: bool) -> None:
    raw = space(plane(gpu), plane(host, name="/host:CPU"),
                plane(gpu, name="/host:metadata" if whole else "/device:GPU:1"))
    full, cut = readers_both(raw)
    assert full == cut


def _metadata_base() -> bytes:
    entries = [entry(i, md(f"kernel_{i}", [stat(1, 7, 8), stat(3, 4, i)] if i % 2 else [],
                           display_name=f"k{i}", id=i)) for i in range(1, 7)]
    entries.append(entry(7, md("with child", extra=field_varint(6, 1))))
    return space(plane(entries, event_ids=[1, 2, 3, 7]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_metadata_same_outcome(data: st.DataObject) -> None:
    """Byte flips, inserted and deleted bytes in a file that is mostly event metadata: the
    same names and stats, or both refuse the file (every byte checked)."""
    blob = mutated(bytearray(_metadata_base()), data, 1, 4,
                   ["set", "bit", "bit", "insert", "delete"])
    full, cut = readers_both(bytes(blob))
    assert full == cut


def _skeleton_error(raw: bytes, whole: tuple[bytes, ...]) -> str | None:
    """What scan, then upb on the skeleton, say of ``raw`` (None: nothing)."""
    try:
        skeleton, _, _ = xspace_native.extension().scan(raw, whole)
    except ValueError as exc:
        return f"scan: {exc}"
    try:
        parse(skeleton, Path("t"))
    except TraceInputError as exc:
        return str(exc)
    return None


_ALL_WHOLE = (b"/device:GPU:0", b"/host:CPU")  # nothing cut: the skeleton of ABI 3


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_entries_same_error_as_before(data: st.DataObject) -> None:
    """Mutations inside event metadata entries: upb says of the new skeleton what it said of
    the old one (where nothing was cut), as a plane with an entry upb refuses is left whole."""
    base = _metadata_base()
    plane0 = plane([])  # the entries lie between the plane's name and its stat metadata
    start, stop = len(plane0) - len(plane0.lstrip(b"\n")), base.index(_stat_metadata())
    blob = bytearray(base)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(start + 16, stop - 1))
        op = data.draw(st.sampled_from(["set", "bit", "high"]))
        if op == "set":
            blob[i] = data.draw(st.integers(0, 255))
        elif op == "bit":
            blob[i] ^= 1 << data.draw(st.integers(0, 7))
        else:
            blob[i] = 0x80
    raw = bytes(blob)
    assert _skeleton_error(raw, xspace_native.WHOLE_PLANES) == _skeleton_error(raw, _ALL_WHOLE)


def test_overlong_string_in_an_entry_same_error_as_before() -> None:
    """A stat string whose length runs past its entry: upb checks the UTF-8 of the bytes that
    follow before it sees the overrun, so what it says depends on them; the plane is left
    whole, so it says what it said before: "bad UTF-8" (of the next entry's varint 308), not
    "corrupt" (after the ASCII stat metadata, were the other entries cut)."""
    entries = [entry(i, md(f"k{i}", [stat(3, 4, 300 + i), stat(1, 5, f"fusion.{i}")]))
               for i in range(1, 40)]
    raw = space(plane(entries))
    at = raw.index(field_bytes(5, b"fusion.7")) + 1
    bad = raw[:at] + b"\x7f" + raw[at + 1:]  # 127 bytes long, not 8
    before = _skeleton_error(bad, _ALL_WHOLE)
    assert before is not None and "UTF-8" in before
    assert _skeleton_error(bad, xspace_native.WHOLE_PLANES) == before
    assert cut_keys(raw)[0] == list(range(1, 40)) and cut_keys(bad)[0] is None


def test_whole_reader_on_mutated_metadata(tmp_path: Path) -> None:
    """The same mutations through the whole reader (both decoders), fewer of them."""
    rng = random.Random(11)
    base = _metadata_base()
    for _ in range(40):
        blob = bytearray(base)
        for _ in range(rng.randrange(1, 3)):
            blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        p = tmp_path / "mut.xplane.pb"
        p.write_bytes(bytes(blob))
        assert_same(p)


# ---------------------------------------------------------------------------------------------
# The extension's own checks
# ---------------------------------------------------------------------------------------------

def test_event_metadata_arguments_are_checked() -> None:
    c = xspace_native.extension()
    raw = space(plane([entry(1, md("a", [stat(1, 7, 8)]))]))
    table = c.scan(raw)[2][0]
    names, by_code = c.event_metadata(raw, table, {1: 0}, 7, {8: "fusion.1"})
    assert names == {1: "a"} and by_code[0] == {1: "fusion.1"} and len(by_code) == 7
    with pytest.raises(ValueError, match="triples"):
        c.event_metadata(raw, table[:-1], {}, 7, {})
    with pytest.raises(ValueError, match="outside the buffer"):
        c.event_metadata(raw, struct.pack("<3q", 1, len(raw), 1), {}, 7, {})
    with pytest.raises(ValueError, match="outside the buffer"):
        c.event_metadata(raw, struct.pack("<3q", 1, -1, 1), {}, 7, {})
    with pytest.raises(ValueError, match="not an event metadata"):
        c.event_metadata(raw, struct.pack("<3q", 1, 0, len(raw)), {}, 7, {})
    with pytest.raises(ValueError, match="too many"):
        c.event_metadata(raw, table, {}, 17, {})
    with pytest.raises(ValueError, match="out of range"):
        c.event_metadata(raw, table, {1: 7}, 7, {})
    with pytest.raises(TypeError):
        c.event_metadata(raw, table, {}, 7, [])
    with pytest.raises(TypeError, match="must be an int"):
        c.event_metadata(raw, table, {}, 7, {"8": "x"})
    with pytest.raises(TypeError, match="must be an int"):
        c.event_metadata(raw, table, {1.5: 0}, 7, {})
    with pytest.raises(TypeError, match="tuple of bytes"):
        c.scan(raw, [b"/host:metadata"])
    with pytest.raises(TypeError, match="tuple of bytes"):
        c.scan(raw, ("/host:metadata",))


def test_event_metadata_survives_random_tables() -> None:
    """Any table over any bytes: a result or ValueError, never a crash."""
    c = xspace_native.extension()
    rng = random.Random(5)
    base = _metadata_base()
    for i in range(2000):
        blob = bytearray(base)
        for _ in range(rng.randrange(0, 4)):
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        blob = bytes(blob)
        recs = [(rng.randrange(-3, 10), rng.randrange(-2, len(blob) + 2),
                 rng.randrange(-2, 60)) for _ in range(rng.randrange(1, 5))]
        table = b"".join(struct.pack("<3q", *r) for r in recs)
        try:
            c.event_metadata(blob, table, {1: 0, 3: 2}, 7, {8: "fusion.1", 9: "jit_step"})
        except ValueError:
            pass
        try:
            c.scan(blob, (b"/host:CPU",) if i % 2 else ())
        except ValueError:
            pass
