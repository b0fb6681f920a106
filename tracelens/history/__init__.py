"""Run history: a store of recorded runs, regression detection across them."""
