"""Usage errors in the one-line form every other error has.

click prints its usage errors as ``Usage: ...``, ``Try '... --help'``, a blank line and
``Error: ...``, while every input error is one line ``error: <path>: <problem>``: a script
reading stderr saw two shapes. The top-level group turns every usage error (a bad option,
value or argument, from click's parsing or from the facade's argument checks) into one line,
``error: <what is wrong> (see '<command> --help')``, exit code 2 as before.
"""

from __future__ import annotations

from typing import IO, Any

import click


class OneLineUsageError(click.UsageError):
    """A usage error shown as one line on stderr."""

    def show(self, file: IO[Any] | None = None) -> None:
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"error: {self.format_message()}{hint}", err=True)


def one_line(exc: click.UsageError) -> click.UsageError:
    """``exc`` as a :class:`OneLineUsageError` (same message, context and exit code); the
    help a bare command prints (click's ``NoArgsIsHelpError``) stays the help."""
    from click.exceptions import NoArgsIsHelpError

    if isinstance(exc, (OneLineUsageError, NoArgsIsHelpError)):
        return exc  # type: ignore[return-value]
    new = OneLineUsageError(exc.format_message(), exc.ctx)
    new.exit_code = exc.exit_code
    return new


class OneLineGroup(click.Group):
    """The top-level group: usage errors of its own parsing and of every command under it
    (parsed in its ``invoke``) become :class:`OneLineUsageError`."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise one_line(exc) from None
