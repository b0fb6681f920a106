"""JSON formats are told from their top-level keys wherever those are (issue 25, A1).

Real tools and scripts write the keys in any order: AMD TraceLens's test traces begin with a
26 KB ``metadata`` object, re-saved traces put ``traceEvents`` first. Before, the Kineto keys
were looked for in the first 4 KiB only and such files were refused as "JSON of an unknown
kind".
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from tests.conftest import SHARED, cli
from tracelens.loading import json_kind as jk
from tracelens.loading.formats import sniff_format

KINETO = sorted((SHARED / "traces" / "kineto").rglob("*.json.gz"))


def _metadata(size: int, decoys: bool = True) -> dict[str, object]:
    """A ``metadata`` object of about ``size`` bytes, as TraceLens's test traces carry (run
    settings, environment); with ``decoys`` its text holds format keys, braces and escaped
    quotes nested inside it, which must not decide."""
    block: dict[str, object] = {"env": {"HIP_VISIBLE_DEVICES": "0,1", "cmd": "python t.py"},
                                "settings": [1, 2.5, None, True]}
    if decoys:
        block.update({"deviceProperties": "{not [a key] \\\" }",
                      "schemaVersion": [1, {"x": "]"}], "note": 'quote " brace { bracket ['})
    n = max(1, size // len(json.dumps(block)))
    return {f"entry{i}": block for i in range(n)}


def _rewrite(doc: dict[str, object], seed: int, meta_bytes: int = 1 << 16,
             decoys: bool = True) -> bytes:
    """``doc`` with a large ``metadata`` object first and its other keys shuffled."""
    keys = list(doc)
    random.Random(seed).shuffle(keys)
    out = {"metadata": _metadata(meta_bytes, decoys)}
    out.update((k, doc[k]) for k in keys)
    return json.dumps(out).encode()


@pytest.fixture
def kind(tmp_path: Path):
    """The format :func:`sniff_format` gives a file holding the bytes, plain and gzipped
    (which must agree)."""
    def sniff(data: bytes) -> str:
        plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
        plain.write_bytes(data)
        packed.write_bytes(gzip.compress(data, compresslevel=1))
        got = sniff_format(plain)
        assert sniff_format(packed) == got
        return got
    return sniff


def test_kineto_keys_after_a_large_metadata_object(kind) -> None:
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": []}
    assert kind(_rewrite(doc, 0)) == "kineto"
    assert kind(_rewrite(doc, 0, meta_bytes=3 << 20)) == "kineto"  # past several chunks


def test_only_top_level_keys_decide(kind) -> None:
    # the decoys sit inside metadata; the events are a plain Chrome trace's
    chrome = {"traceEvents": [{"name": "f", "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1,
                               "cat": "function"}]}
    assert kind(_rewrite(chrome, 1)) == "chrome-json"
    assert kind(_rewrite({"results": [1, 2]}, 1)) == "json"


def test_kineto_told_by_its_event_categories_when_its_keys_come_last(kind) -> None:
    events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "pid": 0, "tid": 7}]
    text = json.dumps({"metadata": _metadata(1 << 17), "traceEvents": events,
                       "displayTimeUnit": "ms"})
    assert kind(text.encode()) == "kineto"


def test_rocprofv3_json_after_other_keys(kind) -> None:
    doc = {"metadata": _metadata(1 << 17), "rocprofiler-sdk-tool": [{"metadata": {}}]}
    assert kind(json.dumps(doc).encode()) == "rocprof-json"


def test_a_key_split_across_reads_and_a_huge_string_value(kind) -> None:
    big = "x" * (jk._CHUNK + 17)  # a string value longer than one read
    doc = {"note": big, "a\\\"b": 1, "distributedInfo": {"rank": 0}}
    assert kind(json.dumps(doc).encode()) == "kineto"


def test_scan_stops_at_its_budget(kind, monkeypatch) -> None:
    monkeypatch.setattr(jk, "SCAN_BUDGET", 1 << 17)
    doc = {"metadata": _metadata(1 << 18), "schemaVersion": 1}
    assert kind(json.dumps(doc).encode()) == "json"  # decided from what was seen


def test_gzip_file_with_metadata_first(tmp_path: Path) -> None:
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(_rewrite({"traceEvents": [], "schemaVersion": 1}, 3)))
    assert sniff_format(p) == "kineto"


@pytest.mark.skipif(not KINETO, reason=f"no real Kineto traces under {SHARED}")
@pytest.mark.parametrize("path", KINETO, ids=[p.name for p in KINETO])
def test_real_kineto_trace_rewritten_reads_the_same(path: Path, tmp_path: Path) -> None:
    """Each real trace with 64 KiB of metadata first and its keys shuffled summarizes
    byte-identically to the original (but for the input path)."""
    copy = tmp_path / path.name  # the same name: host names come from it
    doc = json.loads(gzip.decompress(path.read_bytes()))
    copy.write_bytes(gzip.compress(_rewrite(doc, seed=len(path.name), decoys=False),
                                   compresslevel=1))
    assert sniff_format(copy) == "kineto"
    want = cli("summarize", str(path), "--format", "json", "--quiet")
    got = cli("summarize", str(copy), "--format", "json", "--quiet")
    assert (want.returncode, got.returncode) == (0, 0), got.stderr
    a, b = json.loads(want.stdout), json.loads(got.stdout)
    assert a.pop("inputs")[0]["format"] == b.pop("inputs")[0]["format"] == "kineto"
    assert json.dumps(a).replace(str(path.parent), "") == \
        json.dumps(b).replace(str(tmp_path), "")


@pytest.mark.parametrize("name", ["t.json.gz", "t.xplane.pb.gz", "kernel_trace.csv.gz"])
def test_damaged_deflate_stream_in_the_sniff_window_is_one_error(tmp_path: Path,
                                                                name: str) -> None:
    """Before, ``zlib.error`` escaped ``sniff_format`` as a traceback on every gzip format."""
    from tracelens.core.errors import TraceInputError

    packed = bytearray(gzip.compress(bytes(range(256)) * 64))
    packed[12:20] = b"\xff" * 8  # inside the deflate stream, just after the header
    p = tmp_path / name
    p.write_bytes(bytes(packed))
    with pytest.raises(TraceInputError, match="corrupt or truncated gzip"):
        sniff_format(p)
