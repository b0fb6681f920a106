"""What sets the step time: the critical path, its graph, solve and walk, and
the what-ifs."""
