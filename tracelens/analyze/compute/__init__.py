"""How fast the kernels run: per-kernel sums, roofline and MFU, HLO findings."""
