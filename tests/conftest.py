import os

# Stable redaction placeholders in every test, and no writes to the user's cache folder.
os.environ.setdefault("MRTR_INSPECT_REDACTION_KEY", "test-key")

# Hypothesis' default 200 ms deadline per example fails a property test on a loaded 2-core machine
# (a GC pause, a first import); the examples and every assertion stay, only the clock goes.
from hypothesis import settings  # noqa: E402

settings.register_profile("mrtr-inspect", deadline=None)
settings.load_profile("mrtr-inspect")
