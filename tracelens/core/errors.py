"""The one error type for bad input: the CLI turns it into ``error: <path>: <what>``, exit 2."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with each control character (a newline in a file name, a NUL in a value)
    written as its escape (``\\n``, ``\\x00``), so that the message stays one line. Text
    without control characters is unchanged, so escaping twice changes nothing."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class TraceInputError(Exception):
    """An input file or directory that cannot be read as a trace."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = one_line(str(path))
        self.problem = one_line(problem)
        super().__init__(f"{self.path}: {self.problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Pickle as (path, problem): the error crosses process boundaries (a Dask worker's
        failure reaches the client) and must arrive with its path, not fail to unpickle."""
        return (type(self), (self.path, self.problem))


class TraceUsageError(ValueError):
    """A bad argument: an option value that cannot be right whatever the trace holds (an
    unknown ``--gpu``, a bad ``--time`` or ``--mesh``, an output file that is a folder). The
    facade raises it; the CLI shows it as click's usage error (exit 2). ``option``: the
    option it is about, when the problem is that option's value (click's "Invalid value for
    '<option>'"); ``str(exc)`` is the message either way."""

    def __init__(self, problem: str, option: str | None = None) -> None:
        self.problem = one_line(problem)
        self.option = option
        super().__init__(f"Invalid value for '{option}': {self.problem}" if option
                         else self.problem)

    def __reduce__(self) -> tuple[type, tuple[str, str | None]]:
        return (type(self), (self.problem, self.option))
