"""XProf XSpace files (``*.xplane.pb``) as a :class:`~tracelens.core.model.Trace`.

Layout: ``space`` reads and parses the protobuf messages; ``planes`` resolves a plane's
metadata; two line sources behind the ``source.LineSource`` protocol turn a line's events into
columns (``python_lines``: per event over protobuf messages; ``native``: the C decoder over the
serialized bytes); ``columns`` holds what both share (the stats read, conversions, the frame of
a line, activity kinds, the column budget); ``devices`` turns plane stats into a device row;
``reader`` assembles the Trace.
"""

from parsers.xspace.columns import (COLUMN_BUDGET_BASE, COLUMN_BUDGET_FACTOR,
                                    COLUMN_BYTES_PER_EVENT)
from parsers.xspace.reader import read
from parsers.xspace.space import FORMAT, MAX_PROTO_BYTES, load_xspace, read_raw

__all__ = ["COLUMN_BUDGET_BASE", "COLUMN_BUDGET_FACTOR", "COLUMN_BYTES_PER_EVENT", "FORMAT",
           "MAX_PROTO_BYTES", "load_xspace", "read", "read_raw"]
