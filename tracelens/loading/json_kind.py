"""Which trace format a JSON document is, from its top-level structure wherever the keys are.

JSON key order is free: a Kineto trace re-saved by a script, or one with a large ``metadata``
object first (AMD TraceLens's test traces begin with 26 KB of it), has its telling keys far
from the first bytes. So the document is scanned as a stream of tokens, tracking depth, and
only keys of the top-level object count (a nested ``"deviceProperties"`` says nothing). The
scan stops at the first decisive key, at the end of the top-level object, or after
:data:`SCAN_BUDGET` bytes; whatever was seen by then decides. Values are skipped, not
parsed: the cost is one regex step per string or bracket, and nothing is kept but the key
being read and the first 64 KiB of ``traceEvents``.
"""

from __future__ import annotations

import json
import re
from typing import IO

SCAN_BUDGET = 64 << 20  # bytes of a document scanned at most before deciding from what was seen
EVENTS_LOOK = 1 << 16  # bytes of traceEvents searched for the categories only Kineto writes
_CHUNK = 1 << 20

# Top-level keys only one format writes
_KINETO_KEYS = frozenset({"schemaVersion", "deviceProperties", "distributedInfo",
                          "baseTimeNanoseconds"})
_ROCPROF_KEY = "rocprofiler-sdk-tool"

# Event categories only the PyTorch profiler writes (cpu_op, kernel, cuda_runtime, ...)
KINETO_EVENT = re.compile(rb'"cat": ?"(?:cpu_op|kernel|cuda_runtime|cuda_driver|gpu_memcpy|'
                          rb'gpu_memset|gpu_user_annotation|user_annotation|python_function|'
                          rb'ac2g|cpu_instant_event)"')
# rocprof (v1) results.json: a Chrome trace whose processes are named "CPU HIP API", "GPU<n>"...
ROCPROF_V1_JSON = re.compile(rb'"name": ?"(?:CPU HIP API|CPU HSA API|Markers and Ranges)"')

_FILLER = re.compile(rb'[^"{}\[\],]*')
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN, _CLOSE = frozenset(b"{["), frozenset(b"}]")


def json_kind(fh: IO[bytes], head: bytes) -> str:
    """``kineto``, ``rocprof-json``, ``rocprof-v1-json``, ``chrome-json`` or ``json`` for a
    document whose first bytes (``head``, already read from ``fh``) begin with ``{`` or ``[``
    after white space; ``fh`` is read on from where ``head`` ended, at most
    :data:`SCAN_BUDGET` bytes in all."""
    return _Scan(fh, head).kind()


class _Scan:
    """One pass over the document's tokens; ``buf[pos:]`` is what is not consumed yet."""

    def __init__(self, fh: IO[bytes], head: bytes) -> None:
        self.fh, self.buf, self.pos, self.read = fh, head, 0, len(head)
        self.eof = False
        self.keys: set[str] = set()
        self.events: bytes | None = None  # the first EVENTS_LOOK bytes of traceEvents

    def more(self) -> bool:
        """Append the next chunk (dropping what is consumed); False at the end or budget."""
        if self.eof or self.read >= SCAN_BUDGET:
            return False
        chunk = self.fh.read(min(_CHUNK, SCAN_BUDGET - self.read))
        if not chunk:
            self.eof = True
            return False
        self.read += len(chunk)
        self.buf, self.pos = self.buf[self.pos:] + chunk, 0
        return True

    def kind(self) -> str:
        first = _FILLER.match(self.buf, 0).end()
        top = self.buf[first:first + 1]
        if top == b"[":  # the Chrome "JSON array" form: a list of events, never Kineto's
            return "chrome-json" if b'"ph"' in self.buf else "json"
        self.pos = first
        decided = self._walk()
        if decided:
            return decided
        if "traceEvents" in self.keys or self.events is not None:
            events = self.events or b""
            if KINETO_EVENT.search(events):
                return "kineto"
            return "rocprof-v1-json" if ROCPROF_V1_JSON.search(events) else "chrome-json"
        return "json"

    def _walk(self) -> str | None:
        depth, expect_key = 0, False
        while True:
            self.pos = _FILLER.match(self.buf, self.pos).end()
            if self.pos >= len(self.buf):
                if not self.more():
                    return None
                continue
            c = self.buf[self.pos]
            if c == 0x22:  # a string: a key when it opens a member of the top-level object
                m = _STRING.match(self.buf, self.pos)
                if m is None:
                    if not self.more():
                        return None
                    continue
                self.pos = m.end()
                if depth == 1 and expect_key:
                    decided = self._key(m.group())
                    if decided:
                        return decided
                expect_key = False
            elif c in _OPEN:
                depth += 1
                expect_key = depth == 1 and c == 0x7B
                self.pos += 1
            elif c in _CLOSE:
                depth -= 1
                self.pos += 1
                if depth <= 0:
                    return None  # the end of the top-level value
            else:  # a comma
                expect_key = depth == 1
                self.pos += 1

    def _key(self, token: bytes) -> str | None:
        try:
            key = json.loads(token)
        except ValueError:
            return None
        self.keys.add(key)
        if key == _ROCPROF_KEY:
            return "rocprof-json"
        if key in _KINETO_KEYS:
            return "kineto"
        if key == "traceEvents" and self.events is None:
            while len(self.buf) - self.pos < EVENTS_LOOK and self.more():
                pass
            self.events = self.buf[self.pos:self.pos + EVENTS_LOOK]
            if KINETO_EVENT.search(self.events):
                return "kineto"
        return None
