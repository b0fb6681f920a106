"""``python -m tracelens.cli``: the ``tracelens`` command."""

from tracelens.cli.commands import run

run()
