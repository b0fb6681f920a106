"""Decoders of XLA programs into :mod:`tracelens.core.hlo_model`: the runtime-descriptor schema of
``xla.HloProto`` (``schema``), its decoder (``proto``), the HLO text-dump parser (``text``),
the files of an XLA dump directory (``dump``), the MLIR attribute dictionaries of typed-FFI
custom calls (``attrs``) and the four replica-group encodings (``replica_groups``). The core
reaches them only through :mod:`tracelens.loading.formats`."""
