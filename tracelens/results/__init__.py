"""Typed analysis results: frozen dataclasses holding exact, unrounded values.

Analyzers build them, one JSON module turns them into the documented contract (all rounding
there), and renderers format them without aggregating anything again.
"""
