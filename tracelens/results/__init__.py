"""Typed analysis results: frozen dataclasses holding exact, unrounded values.

Analyzers build them, one JSON module (:mod:`tracelens.results.jsonify`) turns them into the
documented contracts (all rounding there, TypedDicts for the shapes), and renderers format
them without aggregating anything again.
"""
