import os

# Stable redaction placeholders in every test, and no writes to the user's cache folder.
os.environ.setdefault("MRTR_INSPECT_REDACTION_KEY", "test-key")
