"""Recordings: the wire bytes of a session, written as they flow, read back as the same frames."""
