"""Files written beside the text outputs: tables and Perfetto traces."""
