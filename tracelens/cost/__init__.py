"""The cost model (docs/definitions.md#cost-model, #collectives): FLOPs, bytes, dtype and
collective sizes of kernels.

- ``events``: per-activity cost joined onto ``trace.events`` from the HLO of each kernel's op,
  once per distinct (host, program id, op), and the cost notes;
- ``opcost``: the per-instruction HLO formulas, with ``attention`` (typed-FFI attention and
  grouped-GEMM custom calls), ``groups`` (collective group sizes) and ``dtypes`` (the roofline
  dtype of an XLA element type);
- ``shapes``: ATen ops from their recorded shapes (Kineto);
- ``counters``: rocprofv3 kernels from their PMC counters.

Each module is imported where it is used (the package itself imports nothing), so a Kineto
file never loads the HLO formulas. See docs/cost-model.md.
"""
