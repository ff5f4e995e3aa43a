"""A small MCP 2026-07-28 client of our own (raw JSON-RPC, no SDK), correct by default, broken on
purpose with --bug, as the client under test of probe-client's tests.

    python -m tests.probe.mrtr_client http URL [--bug NAME] [--declare elicitation,sampling,roots]
    python -m tests.probe.mrtr_client stdio [--bug NAME] -- CMD [ARG...]

It sends server/discover, then calls `deploy` (and `release` with --parallel, both at once), answers
each round's inputRequests by kind (only the kinds it declared), echoes requestState verbatim with a
new id, gives up after 20 rounds, on -32021 and on a request that takes over --request-timeout
seconds (cancelling it: notifications/cancelled on stdio, closing the response on HTTP). Exit 0
when every call completed, 1 otherwise.

--bug: reuse-id, alter-state, drop-state, truncate-state, ignore-state-only (gives up on a result
without inputRequests), storm (no round cap), answer-undeclared (answers every key), missing-key
(answers only keys named like the recorded ones), resend-32021 (resends unchanged 5 times), hang
(no request timeout), swap-state (with --parallel: each retry carries the other call's state).
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

VERSION = "2026-07-28"
BUGS = ("reuse-id", "alter-state", "drop-state", "truncate-state", "ignore-state-only", "storm", "answer-undeclared",
        "missing-key", "resend-32021", "hang", "swap-state")
CALLS = {"deploy": {"env": "production"}, "release": {"version": "1.0.0"}}
KIND_CAP = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


class GaveUp(Exception):
    pass


class Transport:
    def request(self, msg: dict, timeout: float | None) -> dict:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Http(Transport):
    def __init__(self, url: str) -> None:
        self.url = urlsplit(url)

    def request(self, msg: dict, timeout: float | None) -> dict:
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=timeout)
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": VERSION, "mcp-method": msg["method"]}
        name = (msg.get("params") or {}).get("name")
        if name is not None:
            headers["mcp-name"] = name
        try:
            conn.request("POST", self.url.path, json.dumps(msg).encode(), headers)
            resp = conn.getresponse()
            body = resp.read()
        except TimeoutError:
            conn.close()  # closing the response stream cancels the request (cancellation.mdx)
            raise GaveUp(f"{msg['method']} timed out") from None
        except (OSError, http.client.HTTPException) as e:
            raise GaveUp(f"{msg['method']}: the connection failed: {e!r}") from None
        finally:
            conn.close()
        if "text/event-stream" in (resp.getheader("content-type") or ""):
            datas = [ln[5:].strip() for ln in body.decode().splitlines() if ln.startswith("data:")]
            body = next((d.encode() for d in reversed(datas) if json.loads(d).get("id") == msg["id"]), b"")
        try:
            return json.loads(body)
        except ValueError:
            raise GaveUp(f"{msg['method']}: a malformed answer") from None


class Stdio(Transport):
    def __init__(self, cmd: list[str]) -> None:
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.waiting: dict = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"malformed": True}
            with self.lock:
                targets = [self.waiting.get(msg.get("id"))] if "id" in msg else []
                if msg.get("malformed"):
                    targets = list(self.waiting.values())
            for q in targets:
                if q is not None:
                    q.put(msg)
        with self.lock:
            for q in self.waiting.values():
                q.put(None)

    def send(self, msg: dict) -> None:
        try:
            self.p.stdin.write(json.dumps(msg).encode() + b"\n")
            self.p.stdin.flush()
        except OSError:
            raise GaveUp("the server's stdin is closed") from None

    def request(self, msg: dict, timeout: float | None) -> dict:
        q: queue.Queue = queue.Queue()
        with self.lock:
            self.waiting[msg["id"]] = q
        self.send(msg)
        try:
            got = q.get(timeout=timeout)
        except queue.Empty:
            self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": msg["id"], "reason": "timed out"}})
            raise GaveUp(f"{msg['method']} timed out (cancelled)") from None
        finally:
            with self.lock:
                self.waiting.pop(msg["id"], None)
        if got is None or got.get("malformed"):
            raise GaveUp(f"{msg['method']}: the server {'closed its output' if got is None else 'sent malformed JSON'}")
        return got

    def close(self) -> None:
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()


class Client:
    def __init__(self, t: Transport, bug: str | None, declare: set[str], timeout: float) -> None:
        self.t, self.bug, self.timeout = t, bug, None if bug == "hang" else timeout
        self.ids = itertools.count(1)
        self.caps: dict = {}
        if "elicitation" in declare:
            self.caps["elicitation"] = {"form": {}}
        if "sampling" in declare:
            self.caps["sampling"] = {}
        if "roots" in declare:
            self.caps["roots"] = {}
        self.states: dict[str, str] = {}  # call name -> its latest requestState (swap-state)
        self.lock = threading.Lock()

    def meta(self) -> dict:
        return {"io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientInfo": {"name": "mrtr-probe-test-client", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": self.caps}

    def send(self, method: str, params: dict, rid=None) -> dict:
        msg = {"jsonrpc": "2.0", "id": rid if rid is not None else next(self.ids), "method": method,
               "params": {**params, "_meta": self.meta()}}
        return self.t.request(msg, self.timeout)

    def answer(self, key: str, req: dict) -> dict | None:
        method = req.get("method")
        cap = KIND_CAP.get(method)
        params = req.get("params") or {}
        if method == "elicitation/create" and params.get("mode") == "url" and self.bug != "answer-undeclared":
            return None  # url mode was not declared
        if (cap not in self.caps) and self.bug != "answer-undeclared":
            return None  # a kind it did not declare: left out
        if method == "elicitation/create":
            if params.get("mode") == "url":
                return {"action": "accept"}
            props = (params.get("requestedSchema") or {}).get("properties") or {}
            values = {"boolean": True, "number": 1, "integer": 1}
            return {"action": "accept", "content": {k: values.get(v.get("type"), "yes") for k, v in props.items()}}
        if method == "sampling/createMessage":
            return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "test"}
        return {"roots": [{"uri": "file:///tmp/project", "name": "project"}]}

    def call(self, name: str) -> str:
        params = {"name": name, "arguments": CALLS[name]}
        rid = next(self.ids)
        resp = self.send("tools/call", params, rid)
        resends = 0
        rounds = 0
        while True:
            err = resp.get("error")
            if err is not None:
                if err.get("code") == -32021 and self.bug == "resend-32021" and resends < 5:
                    resends += 1
                    resp = self.send("tools/call", params)
                    continue
                raise GaveUp(f"{name}: error {err.get('code')}: {err.get('message')}")
            result = resp.get("result") or {}
            if result.get("resultType") != "input_required":
                return f"{name}: {result.get('resultType', 'complete')}"
            rounds += 1
            if rounds > 20 and self.bug != "storm":
                raise GaveUp(f"{name}: still asking after 20 rounds")
            asks = result.get("inputRequests") or {}
            if not asks and self.bug == "ignore-state-only":
                raise GaveUp(f"{name}: an input_required result without inputRequests")
            answers = {}
            for key, req in asks.items():
                if self.bug == "missing-key" and key.startswith("mrtr-probe-"):
                    continue
                a = self.answer(key, req)
                if a is not None:
                    answers[key] = a
            retry = dict(params)
            if asks:
                retry["inputResponses"] = answers
            state = result.get("requestState")
            with self.lock:
                self.states[name] = state
            if self.bug == "swap-state":
                time.sleep(0.5)  # both calls hold their states
                with self.lock:
                    other = [s for n, s in self.states.items() if n != name]
                state = other[0] if other else state
            if state is not None and self.bug != "drop-state":
                if self.bug == "alter-state":
                    state = state + "x"
                elif self.bug == "truncate-state":
                    state = state[:1000]
                retry["requestState"] = state
            resp = self.send("tools/call", retry, rid if self.bug == "reuse-id" else None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("transport", choices=("http", "stdio"))
    p.add_argument("target", nargs="*")
    p.add_argument("--bug", choices=BUGS)
    p.add_argument("--declare", default="elicitation", help="comma-separated: elicitation, sampling, roots")
    p.add_argument("--parallel", action="store_true")
    p.add_argument("--request-timeout", type=float, default=3.0)
    argv = sys.argv[1:] if argv is None else list(argv)
    server = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    t: Transport = Http(args.target[0]) if args.transport == "http" else Stdio(server or args.target)
    c = Client(t, args.bug, set(filter(None, args.declare.split(","))), args.request_timeout)
    ok = True
    try:
        c.send("server/discover", {})
        names = ["deploy", "release"] if args.parallel else ["deploy"]
        out: dict[str, str] = {}

        def run(name: str) -> None:
            try:
                out[name] = c.call(name)
            except GaveUp as e:
                out[name] = f"gave up: {e}"

        threads = [threading.Thread(target=run, args=(n,)) for n in names]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for n in names:
            print(out[n], flush=True)
            ok = ok and not out[n].startswith("gave up")
    except GaveUp as e:
        print(f"gave up: {e}", file=sys.stderr)
        ok = False
    finally:
        t.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
