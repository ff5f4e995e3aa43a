"""Adapters: thin shells that turn live traffic into frames for the core (stdio tee, mitmproxy)."""
