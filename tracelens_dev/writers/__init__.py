"""Trace writers: a :class:`tracelens.model.Trace` back into each input format the readers take.

They exist for the tests, the benchmarks and the bundled samples (a known trace written in
every format must read back the same), never for the ``tracelens`` command.
"""
