"""A realistic recording for the `check` benchmark, in recording format v1 (docs/recording-format.md).

Sessions of SDK-shaped stdio traffic (the shapes of fixtures/captures and of the sample server and
client): `server/discover`, `tools/list`, then `tools/call` chains of 1 to 3 rounds asking for
elicitation (form), sampling and roots, each round with a sealed-looking `requestState`, the retry
with a new id, `inputResponses` and the state verbatim; progress notifications now and then. Every
message is stored verbatim after a TAB, as the tee records it. Deterministic for a given seed.

    python bench/gen_recording.py OUT.jsonl [--messages 1000000] [--per-session 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import base64
import json
import random

CLIENT_META = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":'
               '{"name":"mcp","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{"sampling":{},'
               '"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true}}}')
SERVER_META = '"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mrtr-sample","version":"1.4.2"}}'
TOOLS = [
    ("deploy", "Deploy to an environment after the user confirms.", "env"),
    ("release", "Cut a release: asks for the tag, a confirmation and release notes, one round each.", "version"),
    ("summarize", "Summarize a text with the client's model.", "text"),
    ("workspace", "List the client's workspace roots.", None),
]


def _schema(field: str | None, title: str) -> str:
    if field is None:
        return f'{{"type":"object","properties":{{}},"title":"{title}Arguments"}}'
    return (f'{{"type":"object","properties":{{"{field}":{{"title":"{field.title()}","type":"string"}}}},'
            f'"required":["{field}"],"title":"{title}Arguments"}}')


TOOLS_LIST = ('{"cacheScope":"private","resultType":"complete","tools":[' + ",".join(
    f'{{"description":"{d}","inputSchema":{_schema(f, n)},"name":"{n}","outputSchema":{{"properties":{{"result":'
    f'{{"title":"Result","type":"string"}}}},"required":["result"],"title":"{n}Output","type":"object"}}}}'
    for n, d, f in TOOLS) + '],"ttlMs":0,' + SERVER_META + '}')
DISCOVER = ('{"cacheScope":"private","capabilities":{"prompts":{"listChanged":true},"resources":{"listChanged":true,'
            '"subscribe":true},"tools":{"listChanged":true}},"resultType":"complete","supportedVersions":'
            '["2026-07-28"],"ttlMs":0,' + SERVER_META + '}')


def _elicit(key: str, message: str, kind: str) -> str:
    return (f'"{key}":{{"method":"elicitation/create","params":{{"message":"{message}","mode":"form","requestedSchema":'
            f'{{"properties":{{"{key}":{{"type":"{kind}"}}}},"required":["{key}"],"type":"object"}}}}}}')


# per tool: its arguments, then per round (what is asked, what the client answers)
def _plan(tool: str, n: int) -> tuple[str, list[tuple[str, str]]]:
    if tool == "deploy":
        env = ("production", "staging", "preview")[n % 3]
        return f'{{"env":"{env}"}}', [(_elicit("confirm", f"Deploy to {env}?", "boolean"),
                                       '"confirm":{"action":"accept","content":{"confirm":true}}')]
    if tool == "release":
        v = f"{n % 7}.{n % 13}.{n % 5}"
        return f'{{"version":"{v}"}}', [
            (_elicit("tag", f"Tag for release {v}?", "string"), f'"tag":{{"action":"accept","content":{{"tag":"v{v}"}}}}'),
            (_elicit("confirm", f"Publish {v} as v{v}?", "boolean"),
             '"confirm":{"action":"accept","content":{"confirm":true}}'),
            (_elicit("notes", "Release notes?", "string"),
             '"notes":{"action":"accept","content":{"notes":"fixes and small improvements"}}')]
    if tool == "summarize":
        text = f"MRTR turns one request into several exchanges (document {n})."
        return f'{{"text":"{text}"}}', [(
            f'"summary":{{"method":"sampling/createMessage","params":{{"maxTokens":100,"messages":[{{"content":'
            f'{{"text":"Summarize: {text}","type":"text"}},"role":"user"}}]}}}}',
            '"summary":{"role":"assistant","content":{"type":"text","text":"one request, several rounds"},'
            '"model":"sample-model"}')]
    return "{}", [('"roots":{"method":"roots/list"}',
                   '"roots":{"roots":[{"uri":"file:///workspace/project","name":"project"}]}')]


class Writer:
    def __init__(self, f, rnd: random.Random) -> None:
        self.f, self.rnd = f, rnd
        self.t = 1796000000.0
        self.messages = 0
        self.session = ""

    def record(self, rec: dict) -> None:
        self.f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def line(self, d: str, payload: str, dt: float = 0.0007) -> None:
        self.t += dt
        self.f.write(f'{{"t":{self.t:.6f},"s":"{self.session}","k":"line","d":"{d}"}}\t{payload}\n')
        self.messages += 1

    def state(self) -> str:
        return "v1." + base64.urlsafe_b64encode(self.rnd.randbytes(150)).decode().rstrip("=")

    def session_of(self, n: int, size: int) -> None:
        self.session = f"{n:012x}"
        self.record({"mrtr-inspect": "recording", "version": 1, "session": self.session, "transport": "stdio",
                     "t": self.t, "tool": "mrtr-inspect 0.1.0", "pid": 4000 + n,
                     "command": ["python", "-m", "mrtr_inspect.samples.server"]})
        rid = 0
        for method, result in (("server/discover", DISCOVER), ("tools/list", TOOLS_LIST)):
            rid += 1
            self.line("c2s", f'{{"jsonrpc":"2.0","id":{rid},"method":"{method}","params":{{{CLIENT_META}}}}}')
            self.line("s2c", f'{{"jsonrpc":"2.0","id":{rid},"result":{result}}}')
        start, calls = self.messages - 4, 0
        while self.messages - start < size - 9:  # room for the largest chain
            calls += 1
            tool = self.rnd.choice(TOOLS)[0]
            args, rounds = _plan(tool, calls)
            base = f'"name":"{tool}","arguments":{args}'
            rid += 1
            progress = tool == "deploy" and calls % 4 == 0
            meta = CLIENT_META.replace('"_meta":{', f'"_meta":{{"progressToken":{rid},') if progress else CLIENT_META
            self.line("c2s", f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{{base},{meta}}}}}',
                      dt=self.rnd.uniform(0.01, 2.0))
            if progress:
                self.line("s2c", f'{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":'
                                 f'{rid},"progress":1,"total":2,"message":"checking"}}}}')
            for ask, answer in rounds:
                state = self.state()
                self.line("s2c", f'{{"jsonrpc":"2.0","id":{rid},"result":{{"inputRequests":{{{ask}}},"requestState":'
                                 f'"{state}","resultType":"input_required",{SERVER_META}}}}}')
                rid += 1
                self.line("c2s", f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"inputResponses":'
                                 f'{{{answer}}},"requestState":"{state}",{base},{CLIENT_META}}}}}',
                          dt=self.rnd.uniform(0.2, 5.0))
            text = f"{tool} done ({calls})"
            self.line("s2c", f'{{"jsonrpc":"2.0","id":{rid},"result":{{"content":[{{"text":"{text}","type":"text"}}],'
                             f'"isError":false,"resultType":"complete","structuredContent":{{"result":"{text}"}},'
                             f'{SERVER_META}}}}}')
        for d in ("c2s", "s2c"):
            self.record({"t": self.t, "s": self.session, "k": "close", "d": d})
        self.record({"t": self.t, "s": self.session, "k": "session-end", "info": {"exit": 0}})


def generate(path: str, messages: int = 1_000_000, per_session: int = 2000, seed: int = 1) -> int:
    """Write the recording; returns how many messages it holds (about `messages`)."""
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as f:
        w = Writer(f, random.Random(seed))
        n = 0
        while w.messages < messages:
            w.session_of(n, min(per_session, max(messages - w.messages, 12)))
            n += 1
    return w.messages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--per-session", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(generate(args.out, args.messages, args.per_session, args.seed), "messages")


if __name__ == "__main__":
    main()
