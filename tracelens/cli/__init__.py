"""The ``tracelens`` command: options -> one facade call -> a renderer."""
