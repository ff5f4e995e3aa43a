"""What redaction missed: configured paths that matched nothing, and values that look like secrets.

    scan = SecretScan()
    scan.message(msg)                         # each decoded message (core.messages.Message)
    lines = scan.lines(redactor, "--redact-path")   # warnings and notes for the user, at the end

A redaction path with a typo (`params.arguments.apitoken` for `api_token`) redacts nothing and says
nothing; `lines` names each configured path that redacted no string, with the closest path the
traffic had. A value that looks like a secret in what a client sends (`params.arguments`, the
`content` of `inputResponses`) and is not redacted gets a note naming the path to redact.

The heuristic (`looks_secret`), chosen to be quiet on ordinary values:

* a known token shape: `sk-…` (OpenAI, Anthropic), `ghp_`/`gho_`/`ghs_`/`ghu_`/`ghr_`/`github_pat_`
  (GitHub), `xoxb-`/`xoxp-`/`xoxa-`/`xoxs-`/`xapp-` (Slack), `glpat-` (GitLab), `AIza…` (Google),
  `AKIA`/`ASIA` + 16 (AWS access key ids), a JWT (`eyJ….….…`), a PEM private key; each with enough
  characters after the prefix that a word (`sk-learn`) is not one;
* else a high-entropy token: 20 to 512 characters of the base64/base64url/hex alphabet with no
  space, letters and digits both, and more than 4.2 bits of Shannon entropy per character. Hex
  (digests, ids) cannot reach it (16 symbols: at most 4 bits), nor can UUIDs (also excluded by
  shape), words, sentences, paths with dots, versions or timestamps.
"""

from __future__ import annotations

import difflib
from typing import Any

from ..core import jsonpath
from .redaction import ENTROPY, Redactor, entropy, looks_secret  # noqa: F401 (the heuristic lives with redaction, which uses it too)

_SCANNED = ("tools/call", "prompts/get", "resources/read", "completion/complete")
_MAX_PATHS = 2000
_MAX_NOTES = 20


def _general(path: tuple) -> tuple:
    """Array indexes as `*`: the path to redact covers every item."""
    return tuple("*" if type(p) is int else p for p in path)


def _text(path: tuple) -> str:
    return ".".join(str(p) for p in path)


class SecretScan:
    """Collects, over a session or an export, the string paths of client messages (bounded) and
    the values that look like secrets (the first ones, by path)."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.suspects: dict[str, tuple[str, str]] = {}  # path to redact -> (what it looks like, method target)

    def message(self, msg: Any) -> None:
        value = getattr(msg, "value", None)
        if getattr(msg, "kind", None) != "request" or type(value) is not dict:
            return
        params = value.get("params")
        if type(params) is not dict:
            return
        if len(self.paths) < _MAX_PATHS:
            self._paths(params, ("params",))
        if msg.method in _SCANNED:
            self._suspects(params.get("arguments"), ("params", "arguments"), msg)
        ir = params.get("inputResponses")
        if type(ir) is dict:
            for k, answer in ir.items():
                if type(answer) is dict:
                    self._suspects(answer.get("content"), ("params", "inputResponses", "*", "content"), msg)

    def _paths(self, value: Any, path: tuple) -> None:
        if type(value) is dict:
            for k, v in value.items():
                self._paths(v, path + (k,))
        elif type(value) is list:
            for v in value[:20]:
                self._paths(v, path + ("*",))
        elif type(value) is str and len(self.paths) < _MAX_PATHS:
            self.paths.add(_text(path))

    def _suspects(self, value: Any, path: tuple, msg: Any) -> None:
        if type(value) is dict:
            for k, v in value.items():
                self._suspects(v, path + (k,), msg)
        elif type(value) is list:
            for i, v in enumerate(value[:50]):
                self._suspects(v, path + (i,), msg)
        elif type(value) is str and len(self.suspects) < _MAX_NOTES:
            key = _text(_general(path))
            if key not in self.suspects:
                what = looks_secret(value)
                if what is not None:
                    target = msg.params.get("name") or msg.params.get("uri") if type(msg.params) is dict else None
                    self.suspects[key] = (what, " ".join(str(x) for x in (msg.method, target) if x))

    def lines(self, redactor: Redactor, how: str = "redact_paths") -> list[str]:
        """The warnings (a configured path that redacted nothing) and notes (a value that looks like
        a secret), each one line; `how` is how the user adds a path (`--redact-path`, `redact_paths`)."""
        out = []
        for p in redactor.unmatched():
            close = difflib.get_close_matches(p, sorted(self.paths), n=1, cutoff=0.75)
            out.append(f"warning: redaction path {p} matched no string value: nothing was redacted there"
                       + (f" (did you mean {close[0]}?)" if close else ""))
        for path, (what, where) in self.suspects.items():
            if jsonpath.any_match(redactor.paths, jsonpath.parse(path)):
                continue
            out.append(f"note: {path} of {where} looks like {what} and is not redacted: "
                       f"redact it ({how} {path})")
        return out
