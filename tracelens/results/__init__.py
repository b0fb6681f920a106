"""Typed analysis results: frozen dataclasses holding exact, unrounded values.

Analyzers build them; the one generic encoder (:mod:`tracelens.results.encode`) writes the
documented JSON from them (each field declares its rounding and key), and renderers format
them without aggregating anything again.
"""
