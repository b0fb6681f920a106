"""The version, in a module of its own: analyses record it without importing the package face."""

__version__ = "0.1.0"
