"""Parse the MLIR attribute dictionary that typed-FFI custom calls carry in ``backend_config``.

XLA custom calls of API version 4 (typed FFI: Transformer Engine's ``te_*_ffi``, CK/aiter and
other ROCm libraries) have no JSON backend config: their attributes are printed as an MLIR
dictionary, e.g. ``{attn_heads = 16 : i64, is_training = true, scaling_factor =
8.838835e-02 : f32, name = "x", dims = array<i64: 1, 2>}``. This module reads that text into
plain Python values so every FFI custom call's cost rule can use it, not only TE's.

Grammar read (a subset of MLIR's builtin attributes): ``{k = v, ...}`` with bare or quoted
keys, a key without ``= v`` being a unit attribute (``True``); values are integers and floats
with an optional ``: type`` suffix (decimal, hex, ``inf``/``nan``), ``true``/``false``,
``unit``, quoted strings with ``\\"``/``\\\\``/``\\n``/hex escapes, ``[...]`` arrays,
``array<T: ...>`` dense arrays, ``dense<...>`` splats and nested dictionaries. Anything else
makes the whole text unparseable (``None``): a cost rule then says it could not read the
attributes, rather than reading half of them.
"""

from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"[-+]?(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)")
_IDENT = re.compile(r"[A-Za-z_][\w$.\-]*")
_TYPE = re.compile(r"\s*:\s*[A-Za-z_][\w<>x?]*")  # `: i64`, `: f32`, `: tensor<2xi64>`
_PLAIN = re.compile(r'[^"\\]*')
_MAX_DEPTH = 32


class _Error(ValueError):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1

    def peek(self, token: str) -> bool:
        self.ws()
        return self.s.startswith(token, self.i)

    def expect(self, token: str) -> None:
        if not self.peek(token):
            raise _Error(f"expected {token!r} at {self.i}")
        self.i += len(token)

    def string(self) -> str:
        self.expect('"')
        out = []
        while self.i < len(self.s):
            m = _PLAIN.match(self.s, self.i)  # a run without quotes or escapes, in one step
            if m.end() > self.i:
                out.append(m.group())
                self.i = m.end()
                continue
            c = self.s[self.i]
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                nxt = self.s[self.i:self.i + 2]
                if nxt[:1] in ('"', "\\"):
                    out.append(nxt[0])
                    self.i += 1
                elif nxt[:1] in ("n", "t"):
                    out.append("\n" if nxt[0] == "n" else "\t")
                    self.i += 1
                elif len(nxt) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in nxt):
                    out.append(chr(int(nxt, 16)))
                    self.i += 2
                else:
                    raise _Error("bad escape")
        raise _Error("unterminated string")

    def key(self) -> str:
        self.ws()
        if self.peek('"'):
            return self.string()
        m = _IDENT.match(self.s, self.i)
        if not m:
            raise _Error(f"expected a key at {self.i}")
        self.i = m.end()
        return m.group()

    def type_suffix(self) -> None:
        m = _TYPE.match(self.s, self.i)
        if m:
            self.i = m.end()

    def number(self) -> int | float:
        self.ws()
        m = _NUMBER.match(self.s, self.i)
        if not m:
            raise _Error(f"expected a value at {self.i}")
        self.i = m.end()
        text = m.group()
        self.type_suffix()
        body = text.lstrip("+-")
        if body.startswith("0x"):
            return int(text, 16)
        if body.isdigit():
            return int(text)
        return float(text)

    def items(self, close: str, depth: int) -> list[Any]:
        out: list[Any] = []
        if self.peek(close):
            self.i += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            if self.peek(","):
                self.i += 1
                continue
            self.expect(close)
            return out

    def value(self, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise _Error("nested too deeply")
        self.ws()
        if self.peek("{"):
            return self.dictionary(depth)
        if self.peek('"'):
            value = self.string()
            self.type_suffix()
            return value
        if self.peek("["):
            self.i += 1
            return self.items("]", depth)
        if self.peek("array<"):  # dense array: array<i64: 1, 2> (array<i64> is empty)
            self.i += len("array<")
            self.key()  # element type
            if self.peek(">"):
                self.i += 1
                return []
            self.expect(":")
            return self.items(">", depth)
        if self.peek("dense<"):  # splat or list: dense<[1, 2]> : tensor<2xi64>
            self.i += len("dense<")
            inner = self.value(depth + 1)
            self.expect(">")
            self.type_suffix()
            return inner
        for word, val in (("true", True), ("false", False), ("unit", True)):
            if self.s.startswith(word, self.i) and not _IDENT.match(self.s, self.i + len(word)):
                self.i += len(word)
                return val
        return self.number()

    def dictionary(self, depth: int) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        if self.peek("}"):
            self.i += 1
            return out
        while True:
            k = self.key()
            if self.peek("="):
                self.i += 1
                out[k] = self.value(depth + 1)
            else:
                out[k] = True  # unit attribute
            if self.peek(","):
                self.i += 1
                continue
            self.expect("}")
            return out


def parse_attribute_dict(text: str) -> dict[str, Any] | None:
    """The attribute dictionary of ``text`` (``{k = v, ...}``), or None when ``text`` is not
    one (JSON configs, empty text, anything malformed)."""
    p = _Parser(text)
    try:
        if not p.peek("{"):
            return None
        out = p.dictionary(0)
        p.ws()
        return out if p.i == len(p.s) else None
    except (_Error, ValueError, RecursionError):
        return None
