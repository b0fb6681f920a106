"""Runs against runs: ``compare`` and ``scaling``."""
