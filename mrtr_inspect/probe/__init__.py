"""Active probes (`mrtr-inspect probe`, RULES.md §12): mutations of recorded chains sent to a live
server, its reactions judged. `mutations.py` says what each mutation sends and what passes;
`runner.py` plays a chain up to its round and sends the mutated request; `output.py` writes the
report (docs/probes.md)."""
