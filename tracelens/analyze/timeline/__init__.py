"""Where the time goes: the timeline breakdown, idle time by cause, the
report's window, the export tables."""
