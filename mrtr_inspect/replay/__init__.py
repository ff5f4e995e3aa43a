"""Replay: a recording's server played to a live client, its client played to a live server."""
