"""Trace writers: a :class:`tracelens.core.model.Trace` back into each input format the readers
take.

They exist for the tests, the benchmarks and the bundled samples (a known trace written in
every format must read back the same), never for the ``tracelens`` command.
"""

from dataclasses import replace as _replace

import polars as _pl
import polars.selectors as _cs

from tracelens.core.model import Trace as _Trace


def plain_text(trace: _Trace) -> _Trace:
    """``trace`` with its dictionary-encoded text columns (``tracelens.core.model.Text``) as plain
    strings: the writers build their formats with string expressions."""
    def plain(df: _pl.DataFrame) -> _pl.DataFrame:
        return df.with_columns(_cs.categorical().cast(_pl.String))
    return _replace(trace, events=plain(trace.events), host_events=plain(trace.host_events),
                    devices=plain(trace.devices), modules=plain(trace.modules))
