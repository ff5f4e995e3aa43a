"""RULES.md §4.6: Streamable HTTP. Headers, statuses, content types and SSE streams of each exchange.

Unless a rule says otherwise it judges modern exchanges only (RULES.md §2): a POST whose request
declares no `_meta` protocolVersion is a legacy candidate (a server MAY treat it as 2025-03-26).
The rules live by topic: posts.py (a POST, its Accept, body and content type), headers.py (the
request-metadata headers: the pass `HEADERS`, which keeps what their validation found until the
exchange ends, when the server's reaction is judged; values.py is how a header value is encoded
and annotated), statuses.py (error statuses, sessions, GET and DELETE), streams.py (SSE streams;
then `server-initiated-request` and `client-sent-response`, which hold on both transports). They
load in that order, the order of docs/rules.md.
"""

from __future__ import annotations

from . import posts, headers, statuses, streams  # noqa: F401  (registers their rules, in this order)
