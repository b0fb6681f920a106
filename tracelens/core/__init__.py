"""The data model, the one error type, and the primitives every layer shares
(interval arithmetic, text columns, hardware peaks, notices)."""
