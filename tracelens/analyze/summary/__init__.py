"""``summarize``: the per-host partials, their merge and reduce, and the
ranked findings."""
