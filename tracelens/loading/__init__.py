"""Paths in, one classified :class:`tracelens.core.model.Trace` out: which files a
path holds, their formats, one job or not, reading, joining hosts, steps."""
