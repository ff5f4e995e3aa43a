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
TIMEOUTS = "basic/patterns/cancellation.mdx#timeouts"
PROGRESS = "basic/patterns/progress.mdx#behavior-requirements"

ELICIT = "client/elicitation.mdx"
SAMPLING = "client/sampling.mdx"
ROOTS = "client/roots.mdx"
TOOLS = "server/tools.mdx"
CHANGELOG = "changelog.mdx#major-changes"

# MRTR server side and input response shapes (rules/mrtr_server.py, rules/input_responses.py)
ELICIT_REQUESTS = ELICIT + "#elicitation-requests"
ELICIT_SCHEMA = ELICIT + "#requested-schema"
ELICIT_URL_MODE = ELICIT + "#url-mode-elicitation-requests"
ELICIT_SAFE_URL = ELICIT + "#safe-url-handling"
ELICIT_USER_INTERACTION = ELICIT + "#user-interaction-model"
ELICIT_RESPONSE_ACTIONS = ELICIT + "#response-actions"
ELICIT_FORM_SECURITY = ELICIT + "#form-mode-security"
SAMPLING_TOOLS = SAMPLING + "#tools-in-sampling"
SAMPLING_CAPABILITIES = SAMPLING + "#capabilities"
SAMPLING_TOOL_RESULTS = SAMPLING + "#tool-result-messages"
SAMPLING_ERRORS = SAMPLING + "#error-handling"
ROOTS_LISTING = ROOTS + "#listing-roots"
ROOTS_ROOT = ROOTS + "#root"
TOOLS_OUTPUT_SCHEMA = TOOLS + "#output-schema"
CACHING = "server/utilities/caching.mdx#cacheable-results"

# Streamable HTTP and the tasks extension (rules/http/, rules/tasks.py)
HTTP_SECURITY = HTTP + "#security--endpoint"
HTTP_SENDING = HTTP + "#sending-messages"
HTTP_RECEIVING = HTTP + "#receiving-messages"
HTTP_VERSION_HEADER = HTTP + "#protocol-version-header"
HTTP_STANDARD_HEADERS = HTTP + "#standard-request-headers"
HTTP_CUSTOM_HEADERS = HTTP + "#custom-headers-from-tool-parameters"
HTTP_SCHEMA_EXTENSION = HTTP + "#schema-extension"
HTTP_VALUE_ENCODING = HTTP + "#value-encoding"
HTTP_CUSTOM_HEADERS_SERVER = HTTP + "#server-behavior-for-custom-headers"
HTTP_SERVER_VALIDATION = HTTP + "#server-validation"
HTTP_EARLIER_REVISIONS = HTTP + "#earlier-streamable-http-revisions"
SEP_TASKS = "https://modelcontextprotocol.io/seps/2663-tasks-extension"  # SEP-2663: not a page of the specification
TASKS_CAPABILITY = SEP_TASKS + "#capability-negotiation"
TASKS_CREATION = SEP_TASKS + "#task-creation"
TASKS_POLLING = SEP_TASKS + "#task-polling"
TASKS_UPDATE = SEP_TASKS + "#task-update-requests"
TASKS_CANCEL = SEP_TASKS + "#task-cancellation"
TASKS_NOTIFICATIONS = SEP_TASKS + "#task-status-notifications"
TASKS_PROTOCOL_ERRORS = SEP_TASKS + "#protocol-errors"
TASKS_EXECUTION_ERRORS = SEP_TASKS + "#task-execution-errors"
TASKS_BACKCOMPAT = SEP_TASKS + "#backward-compatibility"

# Base protocol, stdio, legacy era (rules/base/, rules/stdio.py, rules/legacy.py)
VERSIONING_MATRIX = "basic/versioning.mdx#compatibility-matrix"
CHANGELOG_MINOR = "changelog.mdx#minor-changes"
DISCOVER = "server/discover.mdx"
DISCOVER_RESULT = DISCOVER + "#discoverresult"
LOGGING = "server/utilities/logging.mdx"
LOGGING_PER_REQUEST = LOGGING + "#per-request-log-level"
LOGGING_ERRORS = LOGGING + "#error-handling"
PROGRESS_FLOW = "basic/patterns/progress.mdx#progress-flow"
CANCEL_TIMING = "basic/patterns/cancellation.mdx#timing-considerations"
SUBSCRIPTIONS_OPENING = "basic/patterns/subscriptions.mdx#opening-a-stream"
SUBSCRIPTIONS_ACK = "basic/patterns/subscriptions.mdx#acknowledgment"
LEGACY_SPEC = "https://modelcontextprotocol.io/specification/2025-11-25/"  # the legacy revision: not this one's pages
LEGACY_REQUESTS = LEGACY_SPEC + "basic#requests"
LEGACY_SESSIONS = LEGACY_SPEC + "basic/transports#session-management"
LEGACY_VERSION_HEADER = LEGACY_SPEC + "basic/transports#protocol-version-header"
LEGACY_ELICIT_URL = LEGACY_SPEC + "client/elicitation#url-mode-elicitation-requests"
LEGACY_TASKS_TOOL_LEVEL = LEGACY_SPEC + "basic/utilities/tasks#tool-level-negotiation"

# --- the 2025-11-25 counterparts of these pages (RULES.md §13: a finding links the revision of the exchange) ---------

# page of this revision → its 2025-11-25 page (the pages 2026-07-28 added have none: MRTR, discover, versioning…)
_LEGACY_PAGES = {
    "basic/index.mdx": "basic",
    "basic/transports/index.mdx": "basic/transports",
    "basic/transports/stdio.mdx": "basic/transports",
    "basic/transports/streamable-http.mdx": "basic/transports",
    "basic/patterns/cancellation.mdx": "basic/utilities/cancellation",
    "basic/patterns/progress.mdx": "basic/utilities/progress",
    "client/elicitation.mdx": "client/elicitation",
    "client/sampling.mdx": "client/sampling",
    "client/roots.mdx": "client/roots",
    "server/tools.mdx": "server/tools",
    "server/prompts.mdx": "server/prompts",
    "server/resources.mdx": "server/resources",
    "server/utilities/logging.mdx": "server/utilities/logging",
}
# the section anchors of those 2025-11-25 pages (their headings, as the site spells them)
_LEGACY_ANCHORS = {
    "basic": "messages requests responses result-responses error-responses notifications auth schema json-schema-usage "
             "schema-dialect example-usage implementation-requirements schema-validation general-fields _meta icons",
    "basic/transports": "stdio streamable-http security-warning sending-messages-to-the-server "
                        "listening-for-messages-from-the-server multiple-connections resumability-and-redelivery "
                        "session-management sequence-diagram protocol-version-header backwards-compatibility "
                        "custom-transports",
    "basic/utilities/cancellation": "cancellation-flow behavior-requirements timing-considerations implementation-notes "
                                    "error-handling",
    "basic/utilities/progress": "progress-flow behavior-requirements implementation-notes",
    "client/elicitation": "user-interaction-model capabilities protocol-messages elicitation-requests "
                          "form-mode-elicitation-requests requested-schema url-mode-elicitation-requests "
                          "completion-notifications-for-url-mode-elicitation url-elicitation-required-error message-flow "
                          "response-actions implementation-considerations statefulness error-handling "
                          "security-considerations safe-url-handling identifying-the-user form-mode-security phishing",
    "client/sampling": "user-interaction-model tools-in-sampling capabilities protocol-messages creating-messages "
                       "sampling-with-tools multi-turn-tool-loop message-content-constraints tool-result-messages "
                       "tool-use-and-result-balance cross-api-compatibility message-roles tool-choice-modes "
                       "parallel-tool-use message-flow data-types messages model-preferences error-handling "
                       "security-considerations",
    "client/roots": "user-interaction-model capabilities protocol-messages listing-roots root-list-changes message-flow "
                    "data-types root error-handling security-considerations implementation-guidelines",
    "server/tools": "user-interaction-model capabilities protocol-messages listing-tools calling-tools "
                    "list-changed-notification message-flow data-types tool tool-names tool-result structured-content "
                    "output-schema error-handling security-considerations",
    "server/prompts": "user-interaction-model capabilities protocol-messages listing-prompts getting-a-prompt "
                      "list-changed-notification message-flow data-types error-handling security",
    "server/resources": "user-interaction-model capabilities protocol-messages listing-resources reading-resources "
                        "resource-templates list-changed-notification subscriptions message-flow data-types "
                        "error-handling security-considerations",
    "server/utilities/logging": "user-interaction-model capabilities log-levels protocol-messages setting-log-level "
                                "log-message-notifications message-flow error-handling implementation-considerations "
                                "security",
}
_LEGACY_ANCHOR_SETS = {page: frozenset(anchors.split()) for page, anchors in _LEGACY_ANCHORS.items()}
# sections 2026-07-28 renamed: (page, anchor) → the 2025-11-25 anchor that says the same
_LEGACY_RENAMED = {
    ("basic/transports/streamable-http.mdx", "sending-messages"): "sending-messages-to-the-server",
    ("basic/transports/streamable-http.mdx", "receiving-messages"): "listening-for-messages-from-the-server",
    ("basic/transports/streamable-http.mdx", "security--endpoint"): "security-warning",
    ("basic/transports/stdio.mdx", ""): "stdio",
    ("basic/transports/streamable-http.mdx", ""): "streamable-http",
}
_legacy_cache: dict = {}


def legacy(ref: str | None) -> str | None:
    """The 2025-11-25 page that says what the page `ref` of this revision says, as a URL: the same
    section where that revision has it (the same anchor, or the one it had before a rename), the page
    itself for a reference to a whole page. None: that revision has no such page or section (the
    sentence is 2026-07-28's own: MRTR, discover, a section added since), or `ref` is already a URL."""
    if not ref or ref.startswith("http"):
        return None
    try:
        return _legacy_cache[ref]
    except KeyError:
        pass
    path, _, anchor = ref.partition("#")
    page = _LEGACY_PAGES.get(path)
    out = None
    if page is not None:
        renamed = _LEGACY_RENAMED.get((path, anchor))
        if renamed is not None:
            out = f"{LEGACY_SPEC}{page}#{renamed}"
        elif not anchor:
            out = LEGACY_SPEC + page
        elif anchor in _LEGACY_ANCHOR_SETS.get(page, ()):
            out = f"{LEGACY_SPEC}{page}#{anchor}"
    _legacy_cache[ref] = out
    return out
