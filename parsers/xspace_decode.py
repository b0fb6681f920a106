"""The C decoder's switches, kept for existing callers: the code is
``parsers.xspace.native``."""

from parsers.xspace.native import (ENV, available, default_decoder, default_threads, extension,
                                   unavailable_reason)

__all__ = ["ENV", "available", "default_decoder", "default_threads", "extension",
           "unavailable_reason"]
