"""What the paths a command was given hold: every file of a folder and what in it could not
be read (walk.py), and byte-identical copies read once (copies.py)."""
