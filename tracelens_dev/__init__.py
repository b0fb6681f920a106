"""Development tooling of tracelens: the synthetic trace generator and the trace writers.

Not part of the installed package (``pip install .`` leaves it out): the tests, the
benchmarks and ``sample_traces/make_samples.py`` find it from the checkout. It may import
any runtime module (``tracelens``, ``parsers``); no runtime module ever imports it
(``tests/test_layers.py`` checks both).

- ``tracelens_dev.synth`` - synthetic training-step traces with their ground truth
  (docs/synthetic.md);
- ``tracelens_dev.writers`` - a Trace written back as XSpace (``writers.xspace``), rocprofv3
  rocpd/JSON/CSV (``writers.rocprof``) or Kineto JSON (``writers.kineto``), so that every
  reader can be tested on the same known activity.
"""
