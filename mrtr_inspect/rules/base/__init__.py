"""RULES.md §4.5: the base protocol of 2026-07-28 (JSON-RPC envelope, ids, error codes, `_meta`,
versions, discovery, caching hints, logging, progress, cancellation, subscriptions).

Most conditions here can hold for any message, and many need what earlier messages of the session
showed (a request cancelled, a server shown to be modern, a -32022 waiting for the client's retry):
they are the checks of one pass, `MESSAGES` (messages.py), whose `_update` keeps that per capture
session before any check of a message runs. Each check is its own rule; the engine dispatches each
message once into the pass, which runs the checks that can apply to it. Rules that need another
observation (a reused id in flight, an answered request, a cancellation) are rules of their own.
The checks live by topic: envelope.py (the envelope and ids), meta.py (`_meta`, versions, pairing,
discovery), errors.py (error codes, removed methods, caching hints), progress.py (logging, progress,
cancellation), subscriptions.py. They load in that order, the order of docs/rules.md; the order of
one message's findings in the report is `MESSAGES.order` below.

Eras (RULES.md §2): requirements that 2026-07-28 introduced are judged on modern exchanges only;
the JSON-RPC rules that 2025-11-25 shares (ids, envelope, progress, cancellation, `_meta` key names)
apply to both eras.
"""

from __future__ import annotations

from .envelope import (
    jsonrpc_envelope_invalid,
    notification_with_id,
    request_id_null,
    request_id_type,
    request_reissued_same_id,
    response_members,
    result_to_notification,
    unterminated_last_message,
)
from .meta import (
    client_info_missing,
    discover_404,
    discover_not_implemented,
    error_response_missing_id,
    fallback_after_modern_error,
    initialize_error_without_versions,
    log_level_invalid,
    listen_closed_untagged,
    meta_key_format_invalid,
    notification_meta_keys,
    progress_token_duplicate_active,
    protocol_version_unsupported_served,
    report_released,
    request_meta_missing,
    response_id_mismatch,
    result_meta_keys,
    server_accepted_request_missing_meta,
    server_info_missing,
    version_retry_not_from_supported,
)
from .errors import (
    error_code_jsonrpc_reserved,
    error_code_legacy_range,
    error_code_not_integer,
    error_code_removed,
    error_code_reserved_undefined,
    removed_method_modern,
    unsupported_version_error_shape,
)
from .progress import (
    log_below_level,
    log_off_request_stream,
    log_without_loglevel,
    message_after_cancel,
    progress_after_cancel,
    progress_not_increasing,
    progress_token_not_active,
    server_cancelled_non_listen,
)
from .subscriptions import subscription_ack_missing, subscription_id_missing, subscription_unrequested_type
from .messages import MESSAGES


# The order of the checks of one message, which is the order of its findings in the report: the
# envelope, then what the kind of message calls for (a request's id and _meta, the client's request
# against what the server said before; a response's pairing and _meta, the evidence it gives, the
# findings that waited for it), then the error codes, methods, logging, progress, cancellation and
# subscriptions.
MESSAGES.order(
    jsonrpc_envelope_invalid, unterminated_last_message,
    # requests
    notification_with_id, request_id_null, request_id_type,
    request_meta_missing, client_info_missing, meta_key_format_invalid, progress_token_duplicate_active,
    version_retry_not_from_supported, fallback_after_modern_error, request_reissued_same_id,
    # responses
    response_members, response_id_mismatch, error_response_missing_id, result_to_notification,
    server_accepted_request_missing_meta, server_info_missing, result_meta_keys, report_released,
    protocol_version_unsupported_served, listen_closed_untagged, log_level_invalid,
    report_released, discover_not_implemented, initialize_error_without_versions, message_after_cancel,
    # notifications
    notification_meta_keys, progress_after_cancel,
    # the rest, in the catalog's order
    error_code_not_integer, error_code_reserved_undefined, error_code_removed, error_code_legacy_range,
    error_code_jsonrpc_reserved, unsupported_version_error_shape, removed_method_modern,
    log_without_loglevel, log_below_level, log_off_request_stream, progress_token_not_active, progress_not_increasing,
    server_cancelled_non_listen, subscription_id_missing, subscription_ack_missing, subscription_unrequested_type,
    # other observations
    discover_404,
)
