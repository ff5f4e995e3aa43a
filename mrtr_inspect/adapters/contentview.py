"""The "MCP JSON-RPC" contentview: mitmproxy and mitmweb show each JSON-RPC message of a body (a JSON
body, or each event of an event stream) decoded, headed by what it is and where it belongs: its
chain and round, as the addon noted them in `flow.metadata["mrtr-inspect"]`, and the findings that
name it. A `requestState` is shown by its hash, never in clear (RULES.md §9).

    from mitmproxy import contentviews
    contentviews.add(McpJsonRpc)
"""

from __future__ import annotations

import json

from mitmproxy.contentviews import Contentview, Metadata

from ..core.canonical import state_hash
from ..core.events import Direction
from ..core.framing import SseDecoder, media_type, parse_sse_event
from ..core.messages import INVALID, RESULT, decode_message
from ..outputs.text import printable
from .flow_notes import NOTES_KEY


def body_messages(data: bytes, content_type: str | None) -> list[bytes]:
    """The payloads of a body: each event's data for an event stream, else the body itself."""
    if media_type(content_type) != "text/event-stream":
        return [data] if data.strip() else []
    dec = SseDecoder()
    events = dec.feed(data)
    rest = dec.close()
    out = []
    for raw in events + ([rest] if rest else []):
        fields = parse_sse_event(raw)
        if fields.data is not None:
            out.append(fields.data)
    return out


def _hide_states(value):
    if isinstance(value, dict):
        return {k: (f"<requestState sha256:{state_hash(v)[:16]}>" if k == "requestState" and isinstance(v, str)
                    else _hide_states(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide_states(v) for v in value]
    return value


def _notes_for(metadata: Metadata, direction: str) -> tuple[list[dict], list[dict]]:
    notes = (metadata.flow.metadata.get(NOTES_KEY) if metadata.flow is not None else None) or {}
    return ([n for n in notes.get("messages", []) if n["direction"] == direction],
            notes.get("findings", []))


class McpJsonRpc(Contentview):
    name = "MCP JSON-RPC"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        is_request = metadata.http_message is not None and metadata.flow is not None and \
            metadata.http_message is getattr(metadata.flow, "request", None)
        notes, findings = _notes_for(metadata, Direction.C2S if is_request else Direction.S2C)
        out = []
        for i, payload in enumerate(body_messages(data, metadata.content_type)):
            msg = decode_message(payload)
            head = notes[i] if i < len(notes) else {}
            line = f"# {head.get('label') or msg.label()}"
            if head.get("chain"):
                line += f"  ·  chain {head['chain']}, {head.get('step', '')}"
            elif msg.kind == RESULT and type(msg.result) is dict and type(msg.result.get("resultType")) is str \
                    and msg.result["resultType"] != "complete":  # not analysed yet (mitmdump prints at once): what the body says
                line += f"  ·  {msg.result['resultType']}"
            out.append(printable(line))
            if msg.kind == INVALID:
                out.append(f"# not a JSON-RPC message: {printable(msg.problem)}")
                out.append(printable(payload.decode("utf-8", "replace")))
            else:  # the layout's newlines stay; what the strings hold that a terminal acts on is escaped
                text = json.dumps(_hide_states(msg.value), indent=2, ensure_ascii=False)
                out.extend(printable(part) for part in text.split("\n"))
        for f in findings:
            out.append(printable(f"# {f['severity']} {f['rule']}: {f['message']}"))
        return "\n".join(out) + "\n"

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        if metadata.flow is not None and NOTES_KEY in metadata.flow.metadata:
            return 2
        if media_type(metadata.content_type) in ("application/json", "text/event-stream") and b'"jsonrpc"' in data[:512]:
            return 1.5  # above the plain JSON view
        return -1
