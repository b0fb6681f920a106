"""The one error type for bad input: the CLI turns it into ``error: <path>: <what>``, exit 2."""

from __future__ import annotations


class TraceInputError(Exception):
    """An input file or directory that cannot be read as a trace."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Pickle as (path, problem): the error crosses process boundaries (a Dask worker's
        failure reaches the client) and must arrive with its path, not fail to unpickle."""
        return (type(self), (self.path, self.problem))
