"""A mitmproxy script for the tests: writes each record of the `mrtr_inspect` logger, with the thread
that logged it and its level, as a JSON line to the file named by MRTR_TEST_LOG_PROBE.

    mitmdump -s addons/mrtr_inspect.py -s tests/e2e/log_probe.py …
"""

import json
import logging
import os


class _Probe(logging.Handler):
    def __init__(self, path: str) -> None:
        super().__init__(logging.DEBUG)
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "mrtr_inspect":
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"thread": record.threadName, "level": record.levelname,
                                    "text": record.getMessage()}) + "\n")


_handler = _Probe(os.environ["MRTR_TEST_LOG_PROBE"])
logging.getLogger("mrtr_inspect").addHandler(_handler)
