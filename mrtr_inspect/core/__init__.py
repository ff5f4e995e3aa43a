"""The sans-IO core: bytes → frames → messages → exchanges → chains → findings.

Nothing in here opens a socket or a file, starts a thread or reads a clock: time arrives with each
event. Adapters (the stdio tee, the mitmproxy addon, the recording reader) feed it.
"""
