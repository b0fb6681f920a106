"""Collectives: exposure, bandwidth, waits, mesh axes, all-to-all balance,
pipeline bubbles."""
