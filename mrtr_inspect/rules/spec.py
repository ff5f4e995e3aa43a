"""Specification references: page paths (under docs/specification/2026-07-28/) with their section anchors.

`core.findings.spec_url` turns them into links on modelcontextprotocol.io.
"""

MRTR = "basic/patterns/mrtr.mdx"
MRTR_SUPPORTED = MRTR + "#supported-requests"
MRTR_SERVER = MRTR + "#server-requirements-basic-workflow"
MRTR_CLIENT = MRTR + "#client-requirements-basic-workflow"
MRTR_ERRORS = MRTR + "#error-handling"
MRTR_SECURITY = MRTR + "#security-considerations"
MRTR_INPUT_REQUESTS = MRTR + "#inputrequests"
MRTR_INPUT_RESPONSES = MRTR + "#inputresponses"
MRTR_IRR = MRTR + "#inputrequiredresult"

BASE = "basic/index.mdx"
BASE_REQUESTS = BASE + "#requests"
BASE_RESULTS = BASE + "#result-responses"
BASE_RESULT_TYPE = BASE + "#resulttype"
BASE_ERRORS = BASE + "#error-responses"
BASE_ERROR_CODES = BASE + "#error-codes"
BASE_NOTIFICATIONS = BASE + "#notifications"
BASE_MESSAGES = BASE + "#messages"
BASE_META = BASE + "#_meta"

VERSIONING = "basic/versioning.mdx#protocol-version-negotiation"
VERSIONING_BACKCOMPAT = "basic/versioning.mdx#backward-compatibility-with-initialization-based-versions"

HTTP = "basic/transports/streamable-http.mdx"
STDIO = "basic/transports/stdio.mdx"
STDIO_SENDING = STDIO + "#sending-messages"
STDIO_RECEIVING = STDIO + "#receiving-messages"
STDIO_CANCEL = STDIO + "#cancellation"
STDIO_BACKCOMPAT = STDIO + "#backward-compatibility"
TRANSPORTS_MESSAGES = "basic/transports/index.mdx#messages"

CANCEL = "basic/patterns/cancellation.mdx#behavior-requirements"
PROGRESS = "basic/patterns/progress.mdx#behavior-requirements"

ELICIT = "client/elicitation.mdx"
SAMPLING = "client/sampling.mdx"
ROOTS = "client/roots.mdx"
TOOLS = "server/tools.mdx"
CHANGELOG = "changelog.mdx#major-changes"
