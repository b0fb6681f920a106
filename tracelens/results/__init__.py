"""Typed analysis results (frozen dataclasses holding unrounded values) and their JSON
contracts: analyses build the dataclasses, renderers read them, and only
:mod:`tracelens.results.jsonify` rounds."""
