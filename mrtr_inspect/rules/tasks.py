"""RULES.md §4.9: the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), as far as the
traffic shows it.

Modern traffic only: the extension is not defined under 2025-11-25, whose experimental tasks
(`tasks/result`, the `task` parameter) are another protocol. Input for a running task goes
`tasks/get` (inputRequests) → `tasks/update` (inputResponses); these are not MRTR retries, and they
are tied together by `params.taskId`.
"""

from __future__ import annotations

import json
import re

from ..core.era import LEGACY, MODERN
from ..core.jsontext import dumps_with
from ..core.messages import Message, id_key
from ..core.observations import Answered, Cancelled, Decoded
from . import shapes, spec
from .common import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    TASKS_EXTENSION,
    chain_of,
    answered,
    at,
    client_caps,
    modern_result,
)
from .mrtr_server import Ask, undeclared_capability
from .registry import ERROR, INFO, TASK, WARNING, Pass, rule

TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
SNAPSHOTS = ("tasks/get", "notifications/tasks")  # where a task's state is shown
TERMINAL = frozenset({"completed", "failed", "cancelled"})
UNKNOWN_TASK = re.compile(r"not\s+found|unknown|no\s+such|does\s*n[o']t\s+exist|expired", re.I)
MAX_TASKS = 10_000  # tasks (or task-creating calls) a rule remembers at once


def _declares(req: Message) -> bool:
    ext = client_caps(req).get("extensions")
    return type(ext) is dict and TASKS_EXTENSION in ext


def _error_code(msg: Message):
    """The code of an error response (None for a result)."""
    return msg.error.get("code") if msg.kind == "error" and type(msg.error) is dict else None


def _got(msg: Message) -> str:
    return f"error {_error_code(msg)}" if msg.kind == "error" else "a result"


def _task_id(obj) -> str | None:
    t = obj.get("taskId") if type(obj) is dict else None
    return t if type(t) is str else None


def _created(obs: Answered) -> str | None:
    """The taskId of a CreateTaskResult (a modern result with resultType "task")."""
    r = modern_result(obs)
    return _task_id(r) if r is not None and r.get("resultType") == "task" else None


def _snapshot(obs) -> tuple[dict, Message, str] | None:
    """The task state a modern tasks/get result or notifications/tasks shows: (task, message, words)."""
    if type(obs) is Answered:
        r = modern_result(obs)
        return (r, obs.response, f"the tasks/get {answered(obs)}") if r is not None else None
    msg = obs.msg
    if msg.era is not MODERN or type(msg.params) is not dict:
        return None
    return msg.params, msg, f"notifications/tasks (message #{msg.index})"


def _remember(mem: dict, key, value) -> None:
    if key not in mem and len(mem) >= MAX_TASKS:
        del mem[next(iter(mem))]  # the oldest
    mem[key] = value


# --- task results ---------------------------------------------------------------------------------


@rule(
    "task-result-undeclared-client", ERROR, on=Answered, kinds=[TASK], section="4.9",
    spec=spec.TASKS_CAPABILITY, conformance="sep-2663-server-rejects-undeclared-client",
    quote="A server MUST NOT return CreateTaskResult to a client that did not include the extension capability on "
          "its request, regardless of prior declarations.",
    summary="resultType \"task\" for a request whose clientCapabilities do not declare the tasks extension.",
    why="The client cannot poll a task it does not know how to handle: the result is lost. Capabilities are per "
        "request; an earlier declaration does not count.",
    example='tools/call with clientCapabilities {} → {"resultType": "task", "taskId": "t1", …}',
)
def task_result_undeclared_client(obs: Answered, ctx) -> None:
    """A modern result with `resultType: "task"` answering a request whose own
    `_meta.clientCapabilities.extensions` lacks `io.modelcontextprotocol/tasks`."""
    r = modern_result(obs)
    if r is None or r.get("resultType") != "task" or _declares(obs.request):
        return
    ctx.emit(f"{answered(obs)} creates a task, but the request did not declare the {TASKS_EXTENSION} extension "
             "in its clientCapabilities", messages=[obs.request.index, obs.response.index], chain=chain_of(obs))


@rule(
    "task-result-unsupported-method", ERROR, on=Answered, kinds=[TASK], section="4.9",
    spec=spec.TASKS_CAPABILITY, conformance="sep-2663-client-rejects-task-result-on-unsupported",
    quote="A client that receives CreateTaskResult in response to an unsupported request type MUST interpret this "
          "as an invalid response to the request.",
    summary="resultType \"task\" in answer to a method other than tools/call.",
    why="Only tools/call supports task-augmented execution; the client must treat anything else as invalid.",
    example='prompts/get → {"resultType": "task", "taskId": "t1", …}',
)
def task_result_unsupported_method(obs: Answered, ctx) -> None:
    """A modern result with `resultType: "task"` answering any method but `tools/call`."""
    r = modern_result(obs)
    if r is None or r.get("resultType") != "task" or obs.request.method == "tools/call":
        return
    ctx.emit(f"{answered(obs)} creates a task, but only tools/call supports task-augmented execution",
             messages=[obs.request.index, obs.response.index])


@rule(
    "tasks-result-type-not-complete", ERROR, on=Answered, kinds=["result"], methods=TASK_METHODS, section="4.9",
    spec=spec.TASKS_POLLING, conformance="sep-2663-result-type-complete-on-tasks-get",
    quote="The resultType field MUST be set to \"complete\" on this object as it is the standard result shape for "
          "the tasks/get request.",
    summary="A tasks/get, tasks/update or tasks/cancel result whose resultType is not \"complete\".",
    why="The task's own status lives in `status`; resultType describes the tasks/* result itself, which is always "
        "complete. A client reading input_required or task here goes down the wrong path.",
    example='tasks/get → {"resultType": "input_required", "taskId": "t1", "status": "input_required", …}',
)
def tasks_result_type_not_complete(obs: Answered, ctx) -> None:
    """A modern tasks/get, tasks/update or tasks/cancel result whose `resultType` is present and not
    "complete" (an absent one is `result-type-missing`; an input_required one also
    `irr-unsupported-method`)."""
    r = modern_result(obs)
    if r is None or "resultType" not in r or r["resultType"] == "complete":
        return
    ctx.emit(f"{answered(obs)} has resultType {json.dumps(r['resultType'])}; {obs.request.method} results are "
             "always \"complete\"", messages=[obs.response.index])


@rule(
    "task-input-required-missing-input-requests", ERROR, on=(Decoded, Answered), kinds=["notification", "result"],
    methods=SNAPSHOTS, section="4.9", spec=spec.TASKS_POLLING, conformance="sep-2663-tasks-get-status-input-required",
    quote="If the status is input_required, the server MUST return a Task object with status input_required and an "
          "inputRequests field",
    summary="A task in status input_required shown without an inputRequests object.",
    why="The client is told input is needed but not which: the task stalls.",
    example='tasks/get → {"resultType": "complete", "taskId": "t1", "status": "input_required"}',
)
def task_input_required_missing_input_requests(obs, ctx) -> None:
    """A modern `tasks/get` result or `notifications/tasks` with `status: "input_required"` whose
    `inputRequests` is absent or not an object."""
    snap = _snapshot(obs)
    if snap is None:
        return
    task, msg, words = snap
    if task.get("status") == "input_required" and type(task.get("inputRequests")) is not dict:
        ctx.emit(f"{words} shows task {_task_id(task)!r} in status input_required "
                 f"{'without inputRequests' if 'inputRequests' not in task else 'with an inputRequests that is not an object'}",
                 messages=[msg.index])


# --- task input keys: one pass, both rules read the same history of each task ----------------------


class _Keys:
    """What one task asked (key → canonical JSON of the request), which keys the client answered
    (acknowledged tasks/update), and which answered keys a later snapshot no longer showed."""

    __slots__ = ("created", "asked", "answered", "cleared", "repeated")

    def __init__(self, created: bool) -> None:
        self.created = created  # the capture saw the CreateTaskResult: every key it ever asked was seen
        self.asked: dict[str, str] = {}
        self.answered: set[str] = set()
        self.cleared: set[str] = set()
        self.repeated: set[str] = set()


_PAYLOAD = dumps_with(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _input_responses(msg: Message) -> dict:
    p = msg.params if type(msg.params) is dict else {}
    ir = p.get("inputResponses")
    return ir if type(ir) is dict else {}


def _histories(ctx) -> dict:
    """The key history of each task, by (session, taskId): the last MAX_TASKS tasks."""
    return {}


class _Sighting:
    """What a snapshot of a task (a tasks/get result, notifications/tasks) showed of its input keys
    against the task's history: (text, severity) of each key `task-input-key-reused` reports."""

    __slots__ = ("msg", "found")

    def __init__(self, msg: Message) -> None:
        self.msg = msg
        self.found: list[tuple[str, str | None]] = []


def _update(obs, tasks: dict):
    """The pass's one step (registry.py): a CreateTaskResult (the capture sees every key the task
    will ask), an acknowledged tasks/update (the keys it answered are answered), a snapshot (the
    keys it shows, against what the task showed before: a `_Sighting` for the checks)."""
    if type(obs) is Answered:
        method = obs.request.method
        if method == "tools/call":
            tid = _created(obs)
            if tid is not None:
                _remember(tasks, (obs.response.session, tid), _Keys(created=True))
            return None
        if method == "tasks/update":
            if modern_result(obs) is not None:
                st = tasks.get((obs.request.session, _task_id(obs.request.params)))
                if st is not None:
                    st.answered.update(_input_responses(obs.request))
            return None
    snap = _snapshot(obs)
    tid = _task_id(snap[0]) if snap is not None else None
    if tid is None:
        return None
    task, msg, words = snap
    key = (msg.session, tid)
    if task.get("status") in TERMINAL:
        tasks.pop(key, None)
        return None
    st = tasks.get(key)
    if st is None:
        st = _Keys(created=False)
        _remember(tasks, key, st)
    seen = _Sighting(msg)
    asked = task.get("inputRequests")
    asked = asked if type(asked) is dict and task.get("status") == "input_required" else {}
    for k, v in asked.items():
        payload = _PAYLOAD(v)
        first = st.asked.setdefault(k, payload)
        if first != payload:
            seen.found.append((f"{words} shows inputRequests key {k!r} of task {tid!r} with a request different from "
                               "the one it named before; a key must name one request over the task's lifetime", None))
            st.asked[k] = payload
        elif k in st.cleared:
            seen.found.append((f"{words} shows inputRequests key {k!r} of task {tid!r} again, after tasks/update "
                               "answered it and a later poll no longer showed it; a key must not be reused after its "
                               "response", None))
            st.cleared.discard(k)
        elif k in st.answered and k not in st.repeated:
            st.repeated.add(k)
            seen.found.append((f"{words} still shows inputRequests key {k!r} of task {tid!r}, which tasks/update "
                               "already answered (acknowledgements are eventually consistent)", INFO))
    st.cleared |= st.answered - asked.keys()
    return seen


TASK_KEYS = Pass("task-keys", on=(Decoded, Answered), state=_histories, per_session=False, update=_update,
                 methods={TASK: ["tools/call"], "result": ["tasks/update", "tasks/get", "notifications/tasks"],
                          "notification": ["notifications/tasks"]})


@TASK_KEYS.check(
    "task-input-key-reused", ERROR, methods={"notification": ["notifications/tasks"],
                                             "result": ["tasks/get", "notifications/tasks"]},
    section="4.9", spec=spec.TASKS_UPDATE,
    conformance="sep-2663-input-request-key-unique-per-task",
    quote="Each request key in inputRequests MUST be unique over the lifetime of a single task.",
    summary="An inputRequests key of a task names a different request than before, or comes back after it was "
            "answered and cleared.",
    why="The client deduplicates by key and answers by key: a reused key makes it skip a new question or send an "
        "old answer to it.",
    example='poll 1 inputRequests {"name": {elicit "Your name?"}}; poll 2 {"name": {elicit "Your age?"}}',
)
def task_input_key_reused(obs, ctx, seen: _Sighting) -> None:
    """Per taskId, across the `tasks/get` results and `notifications/tasks` of the capture: a key whose
    request payload differs from the one first shown under it; or a key shown again after a
    `tasks/update` answered it and a later snapshot no longer showed it. The same payload still
    shown right after the update is reported as info (acknowledgements are eventually consistent)."""
    for text, severity in seen.found:
        ctx.emit(text, messages=[seen.msg.index], severity=severity)


@TASK_KEYS.check(
    "task-update-unknown-key", ERROR, on=Decoded, kinds=["request", "notification"], methods=["tasks/update"],
    section="4.9", spec=spec.TASKS_UPDATE, conformance="sep-2663-update-ignore-unknown-keys",
    quote="Each key MUST correspond to a currently-outstanding inputRequest key.",
    summary="A tasks/update answers a key the task never asked, or one already answered.",
    why="An answer to the wrong key is dropped by the server, so the task keeps waiting for input.",
    example='task asked {"name"}; tasks/update inputResponses {"nmae": …}',
)
def task_update_unknown_key(obs: Decoded, ctx, tasks: dict) -> None:
    """A modern `tasks/update` whose `inputResponses` names a key that the task's `tasks/get`
    results and `notifications/tasks` never showed, or one an earlier acknowledged `tasks/update`
    already answered. Judged only for tasks whose creation the capture saw (otherwise earlier keys
    may be missing). The sentence is a code comment in SEP-2663; servers SHOULD ignore such keys."""
    msg = obs.msg
    st = tasks.get((msg.session, _task_id(msg.params)))
    if msg.era is not MODERN or st is None or not st.created:
        return  # only a task seen from its creation shows every key it asked
    for k in _input_responses(msg):
        why = "was never asked" if k not in st.asked else "was already answered" if k in st.answered else None
        if why:
            ctx.emit(f"tasks/update id={msg.id} (message #{msg.index}) answers key {k!r} of task "
                     f"{_task_id(msg.params)!r}, which {why}; each key must name a currently outstanding input request",
                     messages=[msg.index])


# --- acknowledgements, capabilities, errors ------------------------------------------------------


@rule(
    "task-ack-not-empty", ERROR, on=Answered, kinds=["result"], methods=("tasks/update", "tasks/cancel"),
    section="4.9", spec=spec.TASKS_UPDATE, conformance="sep-2663-update-ack-empty-result",
    quote="On success, the server MUST acknowledge the request with an empty result.",
    summary="A tasks/update or tasks/cancel result with members other than resultType and _meta.",
    why="The acknowledgement is deliberately empty: task state is read with tasks/get only, so a client must not "
        "rely on state returned here.",
    example='tasks/cancel → {"resultType": "complete", "status": "cancelled"}',
)
def task_ack_not_empty(obs: Answered, ctx) -> None:
    """A successful modern `tasks/update` or `tasks/cancel` result carrying members besides
    `resultType` and `_meta`."""
    r = modern_result(obs)
    extra = sorted(k for k in r if k not in ("resultType", "_meta")) if r is not None else None
    if extra:
        ctx.emit(f"{answered(obs)} carries {', '.join(extra)}; a {obs.request.method} acknowledgement is an empty result",
                 messages=[obs.response.index])


@rule(
    "tasks-non-declaring-client", ERROR, on=Answered, kinds=["result", "error"], methods=TASK_METHODS,
    section="4.9", spec=spec.TASKS_PROTOCOL_ERRORS, conformance="sep-2663-tasks-methods-non-declaring",
    quote="Servers MUST return this error for non-declaring clients issuing tasks/get, tasks/update, and "
          "tasks/cancel requests.",
    summary="tasks/get, tasks/update or tasks/cancel without the tasks extension declared, not answered with -32021.",
    why="Capabilities are per request: a request that does not declare the extension must be refused, so that a "
        "client cannot touch tasks it never negotiated.",
    example="tasks/get with clientCapabilities {} → a Task",
)
def tasks_non_declaring_client(obs: Answered, ctx) -> None:
    """A modern tasks/* request whose own clientCapabilities lack the extension, answered with
    anything but a -32021 (MissingRequiredClientCapability) error."""
    req, resp = obs.request, obs.response
    if req is None or req.era is not MODERN or _declares(req) or _error_code(resp) == MISSING_CAPABILITY:
        return
    ctx.emit(f"{at(req)} does not declare the {TASKS_EXTENSION} extension, yet got {_got(resp)} "
             f"(message #{resp.index}) instead of -32021", messages=[req.index, resp.index])


@rule(
    "tasks-invalid-task-id", ERROR, on=Answered, kinds=["result", "error"], methods=TASK_METHODS, section="4.9",
    spec=spec.TASKS_PROTOCOL_ERRORS, conformance="sep-2663-tasks-get-invalid-task-id-32602",
    quote="Invalid or nonexistent taskId: -32602 (Invalid params). Servers MUST return this error for tasks/get. "
          "Servers SHOULD return this error for tasks/update and tasks/cancel.",
    summary="An unknown taskId not answered with -32602 (error for tasks/get, warning for update and cancel).",
    why="Clients tell a gone task from a server failure by -32602; another code makes them retry forever.",
    example='tasks/get {taskId: "nope"} → {"error": {"code": -32603, "message": "Task not found"}}',
)
def tasks_invalid_task_id(obs: Answered, ctx) -> None:
    """Judged only where the traffic shows the task is unknown (heuristic, RULES.md: a passive observer
    cannot know the server's tasks): an error whose message says so (not found, unknown, no such,
    does not exist, expired) with a code other than -32602; or a tasks/update or tasks/cancel
    acknowledged for a taskId that this server answered -32602 to on tasks/get. A warning for
    tasks/update and tasks/cancel (SHOULD), an error for tasks/get (MUST)."""
    req, resp = obs.request, obs.response
    tid = _task_id(req.params) if req is not None and req.era is MODERN else None
    if tid is None:
        return
    sev = None if req.method == "tasks/get" else WARNING
    where = f"{at(req)} for task {tid!r}"
    if resp.kind == "error":
        err = resp.error if type(resp.error) is dict else {}
        code = _error_code(resp)
        if code == INVALID_PARAMS:
            if req.method == "tasks/get":
                _remember(ctx.mem, (req.session, tid), True)
        elif UNKNOWN_TASK.search(f"{err.get('message')} {json.dumps(err.get('data'))}"):
            ctx.emit(f"{where} got error {code} saying the task is unknown ({err.get('message')!r}, message "
                     f"#{resp.index}); an unknown taskId is answered with -32602", messages=[req.index, resp.index],
                     severity=sev)
    elif req.method != "tasks/get" and (req.session, tid) in ctx.mem:
        ctx.emit(f"{where} was acknowledged (message #{resp.index}), although the server answered -32602 to tasks/get "
                 "for this task earlier", messages=[req.index, resp.index], severity=sev)


@rule(
    "task-failed-for-tool-error", ERROR, on=(Decoded, Answered), kinds=["notification", "result"], methods=SNAPSHOTS,
    section="4.9", spec=spec.TASKS_EXECUTION_ERRORS, conformance="sep-2663-tool-error-uses-completed-status",
    quote="The failed status MUST NOT be used to represent non-JSON-RPC errors, such as a tool result that completed "
          "with isError: true.",
    summary="A task in status failed whose payload is a tool result with isError: true.",
    why="A tool error is a normal result the model should see; failed is for JSON-RPC (protocol) errors only.",
    example='{"status": "failed", "result": {"content": […], "isError": true}}',
)
def task_failed_for_tool_error(obs, ctx) -> None:
    """A modern `tasks/get` result or `notifications/tasks` with `status: "failed"` whose `result`, or
    whose `error`, is a tool result with `isError: true`."""
    snap = _snapshot(obs)
    if snap is None or snap[0].get("status") != "failed":
        return
    task, msg, words = snap
    for field in ("result", "error"):
        v = task.get(field)
        if type(v) is dict and v.get("isError") is True:
            ctx.emit(f"{words} shows task {_task_id(task)!r} failed with a tool result (isError: true) in {field}; "
                     "a tool error completes the task with that result", messages=[msg.index])
            return


@rule(
    "task-cancel-via-notification", ERROR, on=(Answered, Cancelled), kinds=[TASK], methods=("tools/call",),
    section="4.9", spec=spec.TASKS_CANCEL, conformance="sep-2663-cancel-not-via-cancelled-notification",
    quote="The notifications/cancelled notification MUST NOT be used for task cancellation.",
    summary="notifications/cancelled naming the tools/call that created a task.",
    why="The tools/call was already answered (with the task handle); the task goes on. Tasks are cancelled with "
        "tasks/cancel.",
    example='tools/call id 4 → {"resultType": "task", "taskId": "t1"}; notifications/cancelled {requestId: 4}',
)
def task_cancel_via_notification(obs, ctx) -> None:
    """A client `notifications/cancelled` whose `requestId` is a tools/call of the same peer that was
    answered with a CreateTaskResult (and no request with that id is in flight again)."""
    if type(obs) is Answered:
        tid = _created(obs)
        if tid is not None:
            _remember(ctx.mem, (obs.request.peer, obs.request.idk), (tid, obs.request.index, obs.response.index))
        return
    note = obs.notification
    if note.method != "notifications/cancelled" or obs.request is not None or not ctx.mem:
        return
    p = note.params if type(note.params) is dict else {}
    hit = ctx.mem.get((note.peer, id_key(p.get("requestId"))))
    if hit is not None:
        ctx.emit(f"notifications/cancelled (message #{note.index}) names tools/call id={p.get('requestId')} (message "
                 f"#{hit[1]}), which created task {hit[0]!r} (message #{hit[2]}); a task is cancelled with tasks/cancel",
                 messages=[hit[1], hit[2], note.index])


@rule(
    "task-stream-progress-or-log", ERROR, on=Decoded, kinds=["notification"], directions=["s2c"],
    methods=("notifications/progress", "notifications/message"), transports=["http"], section="4.9", spec=spec.TASKS_NOTIFICATIONS,
    conformance="sep-2663-no-progress-or-message-on-task-stream",
    quote="notifications/progress and notifications/message notifications MUST NOT be sent on the "
          "subscriptions/listen stream for a task",
    summary="notifications/progress or notifications/message on a listen stream that subscribed to task ids.",
    why="Progress and logging are not supported on tasks; a client subscribed for task status does not expect them.",
    example='subscriptions/listen {notifications: {taskIds: ["t1"]}} stream carries notifications/progress',
)
def task_stream_progress_or_log(obs: Decoded, ctx) -> None:
    """On HTTP, a progress or log notification on the SSE stream of a modern `subscriptions/listen`
    whose `notifications.taskIds` is a non-empty list (stdio streams cannot be told apart)."""
    x = obs.exchange
    req = x.request if x is not None else None
    if req is None or req.method != "subscriptions/listen" or req.era is not MODERN:
        return
    p = req.params if type(req.params) is dict else {}
    wanted = p.get("notifications")
    ids = wanted.get("taskIds") if type(wanted) is dict else None
    if type(ids) is list and ids:
        ctx.emit(f"{at(obs.msg)} on the listen stream of {at(req)}, which subscribed to task ids {ids}", messages=[req.index, obs.msg.index])


@rule(
    "tasks-result-not-method-not-found", ERROR, on=Answered, kinds=["result", "error"], methods=("tasks/result",),
    section="4.9", spec=spec.TASKS_BACKCOMPAT, conformance="sep-2663-tasks-result-removed-method-not-found",
    quote="tasks/result is removed; clients calling it MUST receive -32601 (Method Not Found).",
    summary="tasks/result on a modern exchange not answered with -32601.",
    why="A client of the 2025-11-25 experimental tasks must learn at once that the blocking call is gone.",
    example="tasks/result (2026-07-28) → a result",
)
def tasks_result_not_method_not_found(obs: Answered, ctx) -> None:
    """A modern `tasks/result` answered with a result or with an error whose code is not -32601."""
    req, resp = obs.request, obs.response
    if req is None or req.era is not MODERN or _error_code(resp) == METHOD_NOT_FOUND:
        return
    ctx.emit(f"{at(req)} got {_got(resp)} (message #{resp.index}); tasks/result is removed and "
             "answered with -32601", messages=[req.index, resp.index])


@rule(
    "task-shape-carries-request-state", WARNING, on=(Decoded, Answered),
    methods={"notification": ("tools/call",) + SNAPSHOTS, "result": SNAPSHOTS, TASK: ["tools/call"]},
    section="4.9", spec=spec.TASKS_CREATION,
    conformance="tasks-create-result-no-request-state",
    summary="A CreateTaskResult, a task from tasks/get or a notifications/tasks carrying requestState, or a "
            "CreateTaskResult carrying inputRequests.",
    why="SEP-2663 defines neither member there; MRTR state and questions belong to input_required results, so a "
        "client may treat the task as an MRTR round (the conformance suite fails it).",
    example='{"resultType": "task", "taskId": "t1", "status": "working", "requestState": "abc"}',
)
def task_shape_carries_request_state(obs, ctx) -> None:
    """A modern CreateTaskResult (`resultType: "task"`) with `requestState` or `inputRequests`, or a
    `tasks/get` result or `notifications/tasks` with `requestState`."""
    if type(obs) is Answered and obs.request is not None and obs.request.method == "tools/call":
        r = modern_result(obs)
        if r is None or r.get("resultType") != "task":
            return
        task, msg, words, fields = r, obs.response, f"the CreateTaskResult {answered(obs)}", ("requestState", "inputRequests")
    else:
        snap = _snapshot(obs)
        if snap is None:
            return
        (task, msg, words), fields = snap, ("requestState",)
    found = [f for f in fields if f in task]
    if found:
        ctx.emit(f"{words} carries {' and '.join(found)}, which the tasks extension does not define there",
                 messages=[msg.index])


@rule(
    "task-input-requests-undeclared-capability", INFO, on=Answered, kinds=["result"], methods=("tasks/get",),
    section="4.9", spec=spec.MRTR_SERVER,
    quote="Servers MUST NOT send an inputRequests that the client has not declared support for in its capabilities.",
    summary="A task's inputRequests need a capability the tasks/get request did not declare.",
    why="The client may be unable to answer; whether the MRTR capability rule applies to task input is not said "
        "(RULES.md §7.14), hence info.",
    example='tasks/get with clientCapabilities {"extensions": {…tasks}}; inputRequests asks sampling/createMessage',
)
def task_input_requests_undeclared_capability(obs: Answered, ctx) -> None:
    """A modern `tasks/get` result whose `inputRequests` include a request needing a capability that
    this tasks/get request's own clientCapabilities lack (the checks of
    `input-request-undeclared-capability`)."""
    r = modern_result(obs)
    asked = r.get("inputRequests") if r is not None else None
    if type(asked) is not dict:
        return
    caps = client_caps(obs.request)
    for k, v in asked.items():
        if type(v) is not dict:
            continue
        need = undeclared_capability(Ask(k, v, shapes.MODERN, "", [], None), caps)
        if need:
            ctx.emit(f"input request {k!r} of the tasks/get {answered(obs)} needs the {need} capability, which the "
                     "tasks/get request did not declare", messages=[obs.request.index, obs.response.index],
                     details={"key": k, "capability": need})


# --- 2025-11-25 tasks (RULES.md §13): a tool that requires a task -------------------------------------------------


def _requires_task(ctx, req: Message | None) -> bool:
    """A legacy `tools/call` without `params.task` for a tool whose `tools/list` entry said
    `execution.taskSupport: "required"`."""
    if req is None or req.era is not LEGACY or req.method != "tools/call" or type(req.params) is not dict:
        return False
    if "task" in req.params:
        return False
    tool = ctx.knowledge.tool(req.session, req.params.get("name"))
    execution = tool.get("execution") if tool is not None else None
    return type(execution) is dict and execution.get("taskSupport") == "required"


@rule(
    "legacy-task-required-not-used", ERROR, on=Decoded, kinds=["request"], methods=["tools/call"],
    directions=["c2s"], eras=[LEGACY], section="13", spec=spec.LEGACY_TASKS_TOOL_LEVEL,
    quote='If execution.taskSupport is "required", clients MUST invoke the tool as a task.',
    summary="A 2025-11-25 tools/call without a task for a tool whose tools/list entry requires one.",
    why="The server cannot run the tool as a plain call; the client gets an error (or, from a server that gets it "
        "wrong too, a result that only says so) instead of a task to poll.",
    example='tools/list: {"name": "research", "execution": {"taskSupport": "required"}}; then tools/call research '
            "without params.task",
)
def legacy_task_required_not_used(obs: Decoded, ctx) -> None:
    """On a 2025-11-25 session, a `tools/call` without `params.task` for a tool whose earlier
    `tools/list` entry says `execution.taskSupport: "required"` (tasks.mdx "Tool-Level Negotiation")."""
    msg = obs.msg
    if _requires_task(ctx, msg):
        ctx.emit(f"{at(msg)} calls {msg.params.get('name')!r} without params.task, but its tools/list entry says "
                 'taskSupport "required": the client MUST invoke it as a task', messages=[msg.index],
                 chain=obs.creq.chain.id if obs.creq is not None else None)


@rule(
    "legacy-task-required-wrong-error", ERROR, on=Answered, kinds=["result", "error"], methods=["tools/call"],
    directions=["s2c"], eras=[LEGACY], section="13", spec=spec.LEGACY_TASKS_TOOL_LEVEL,
    quote='Servers MUST return a -32601 (Method not found) error if a client does not attempt to do so.',
    summary="A 2025-11-25 server answers a task-less call of a task-required tool with anything but error -32601.",
    why="A client reads an isError result as the tool's own failure, not as \"call me as a task\": it cannot "
        "recover by retrying as a task.",
    example='tools/call research (no task) → {"content": [{"type": "text", "text": "MCP error -32601: …"}], '
            '"isError": true}',
)
def legacy_task_required_wrong_error(obs: Answered, ctx) -> None:
    """The server's answer to such a call (see `legacy-task-required-not-used`) that is not a JSON-RPC
    error -32601: a result (an `isError: true` result whose text says -32601 too), or another code."""
    resp = obs.response
    if not _requires_task(ctx, obs.request) or (resp.kind == "error" and _error_code(resp) == METHOD_NOT_FOUND):
        return
    got = f"error {_error_code(resp)}" if resp.kind == "error" else (
        "an isError result" if type(resp.result) is dict and resp.result.get("isError") is True else "a result")
    ctx.emit(f"{answered(obs)} is {got}; a task-less call of a tool that requires a task MUST get a -32601 error",
             messages=[obs.request.index, resp.index], chain=chain_of(obs))
