"""Run history (issue 29): a store of recorded runs, regression detection across them."""
