"""RULES.md §4.9, the tasks extension (SEP-2663): each rule's trigger and near miss."""

from __future__ import annotations

from typing import Any

from mrtr_inspect.core.findings import Finding
from tests.traffic import CAPS_ALL, CLIENT_INFO, ELICIT, HTTP_HEADERS, SAMPLE, VERSION, Traffic

TASKS = "io.modelcontextprotocol/tasks"
DECLARED = {**CAPS_ALL, "extensions": {TASKS: {}}}
TASK = {"taskId": "t1", "status": "working", "createdAt": "2026-07-28T10:00:00Z",
        "lastUpdatedAt": "2026-07-28T10:00:00Z", "ttlMs": 60000, "pollIntervalMs": 1000}
ASK_NAME = {"method": "elicitation/create", "params": {"mode": "form", "message": "Your name?", "requestedSchema": {
    "type": "object", "properties": {"name": {"type": "string"}}}}}
ASK_AGE = {"method": "elicitation/create", "params": {"mode": "form", "message": "Your age?", "requestedSchema": {
    "type": "object", "properties": {"age": {"type": "integer"}}}}}
NAME = {"action": "accept", "content": {"name": "Luca"}}


def create(t: Traffic, task_id: str = "t1", caps: dict = DECLARED, **extra) -> Any:
    """tools/call answered with a CreateTaskResult; returns the call's id."""
    i = t.call("tools/call", {"name": "deploy", "arguments": {}}, caps=caps)
    t.result(i, {**TASK, "taskId": task_id, **extra}, result_type="task")
    return i


def poll(t: Traffic, status: str = "working", task_id: str = "t1", caps: dict = DECLARED, **fields) -> Any:
    i = t.call("tasks/get", {"taskId": task_id}, caps=caps)
    t.result(i, {**TASK, "taskId": task_id, "status": status, **fields})
    return i


def asking(t: Traffic, requests: dict, task_id: str = "t1") -> Any:
    return poll(t, "input_required", task_id, inputRequests=requests)


def update(t: Traffic, responses: dict, task_id: str = "t1", ack: dict | None = None) -> Any:
    i = t.call("tasks/update", {"taskId": task_id, "inputResponses": responses}, caps=DECLARED)
    t.result(i, ack or {})
    return i


def msgs(f: list[Finding]) -> list[list[int]]:
    return [x.messages for x in f]


# --- task results --------------------------------------------------------------------------------------------------


def test_task_result_undeclared_client():
    t = Traffic()
    create(t, caps=CAPS_ALL)
    create(t, "t2")
    f = t.run().of("task-result-undeclared-client")
    assert msgs(f) == [[0, 1]] and TASKS in f[0].message and f[0].chain == "c1"  # its chain, not null


def test_task_result_unsupported_method():
    t = Traffic()
    i = t.call("prompts/get", {"name": "p"}, caps=DECLARED)
    t.result(i, TASK, result_type="task")
    create(t, "t2")
    f = t.run().of("task-result-unsupported-method")
    assert msgs(f) == [[0, 1]] and "prompts/get" in f[0].message


def test_tasks_result_type_not_complete():
    t = Traffic()
    i = t.call("tasks/update", {"taskId": "t1", "inputResponses": {}}, caps=DECLARED)
    t.result(i, {}, result_type="task")
    update(t, {})
    i = t.call("tasks/cancel", {"taskId": "t1"}, caps=DECLARED)
    t.result(i, {}, result_type=None)  # absent: result-type-missing's business, not this rule's
    f = t.run().of("tasks-result-type-not-complete")
    assert msgs(f) == [[1]] and '"task"' in f[0].message


def test_task_input_required_missing_input_requests():
    t = Traffic()
    poll(t, "input_required")
    t.notify("notifications/tasks", {**TASK, "status": "input_required"}, direction="s2c")
    asking(t, {"name": ASK_NAME})
    f = t.run().of("task-input-required-missing-input-requests")
    assert msgs(f) == [[1], [2]] and "tasks/get" in f[0].message and "notifications/tasks" in f[1].message


# --- task input keys --------------------------------------------------------------------------------------------------


def test_task_input_key_names_another_request():
    t = Traffic()
    create(t)
    asking(t, {"name": ASK_NAME})
    asking(t, {"name": ASK_NAME})  # the same request again before it is answered: fine
    asking(t, {"name": ASK_AGE})
    f = t.run().of("task-input-key-reused")
    assert msgs(f) == [[7]] and "different" in f[0].message


def test_task_input_key_comes_back_after_it_was_answered():
    t = Traffic()
    create(t)
    asking(t, {"name": ASK_NAME})
    update(t, {"name": NAME})
    asking(t, {"name": ASK_NAME})  # still shown right after the ack: eventually consistent (info)
    poll(t, "working")  # now cleared
    asking(t, {"name": ASK_NAME})  # back again: reused
    f = t.run().of("task-input-key-reused")
    assert [(x.severity, x.messages) for x in f] == [("info", [7]), ("error", [11])]
    assert "again, after tasks/update answered it" in f[1].message


def test_task_input_keys_are_per_task_and_end_with_it():
    t = Traffic()
    create(t)
    asking(t, {"name": ASK_NAME})
    poll(t, "completed", result={"content": []})
    asking(t, {"name": ASK_AGE}, task_id="t2")  # another task may use the same key for another question
    assert not t.run().of("task-input-key-reused")


def test_task_update_unknown_key():
    t = Traffic()
    create(t)
    asking(t, {"name": ASK_NAME})
    update(t, {"nmae": NAME})
    update(t, {"name": NAME})
    update(t, {"name": NAME})
    f = t.run().of("task-update-unknown-key")
    assert msgs(f) == [[4], [8]]
    assert "was never asked" in f[0].message and "was already answered" in f[1].message


def test_task_update_unknown_key_needs_the_task_creation():
    t = Traffic()  # the capture began after the task was created: earlier keys may be unseen
    asking(t, {"name": ASK_NAME})
    update(t, {"other": NAME})
    assert not t.run().of("task-update-unknown-key")


# --- acknowledgements, capabilities, errors ---------------------------------------------------------------------------


def test_task_ack_not_empty():
    t = Traffic()
    i = t.call("tasks/cancel", {"taskId": "t1"}, caps=DECLARED)
    t.result(i, {"status": "cancelled"})
    i = t.call("tasks/cancel", {"taskId": "t1"}, caps=DECLARED)
    t.result(i, {})  # resultType and _meta only
    f = t.run().of("task-ack-not-empty")
    assert msgs(f) == [[1]] and "status" in f[0].message


def test_tasks_non_declaring_client():
    t = Traffic()
    poll(t, caps=CAPS_ALL)
    i = t.call("tasks/get", {"taskId": "t1"}, caps=CAPS_ALL)
    t.error(i, -32021, "Missing required client capability",
            data={"requiredCapabilities": {"extensions": {TASKS: {}}}})
    poll(t)
    f = t.run().of("tasks-non-declaring-client")
    assert msgs(f) == [[0, 1]] and "a result" in f[0].message


def test_tasks_invalid_task_id():
    t = Traffic()
    i = t.call("tasks/get", {"taskId": "nope"}, caps=DECLARED)
    t.error(i, -32603, "Failed to retrieve task: Task not found")
    i = t.call("tasks/cancel", {"taskId": "gone"}, caps=DECLARED)
    t.error(i, -32000, "unknown task")
    i = t.call("tasks/get", {"taskId": "old"}, caps=DECLARED)
    t.error(i, -32602, "Failed to retrieve task: Task has expired")  # the right code
    i = t.call("tasks/cancel", {"taskId": "old"}, caps=DECLARED)
    t.result(i, {})  # acknowledged although the server said it is unknown
    i = t.call("tasks/get", {"taskId": "t1"}, caps=DECLARED)
    t.error(i, -32603, "database down")  # says nothing about the task
    f = t.run().of("tasks-invalid-task-id")
    assert [(x.severity, x.messages) for x in f] == [("error", [0, 1]), ("warning", [2, 3]), ("warning", [6, 7])]


def test_task_failed_for_tool_error():
    t = Traffic()
    poll(t, "failed", result={"content": [{"type": "text", "text": "no"}], "isError": True})
    poll(t, "completed", result={"content": [{"type": "text", "text": "no"}], "isError": True})
    poll(t, "failed", error={"code": -32603, "message": "crashed"})
    f = t.run().of("task-failed-for-tool-error")
    assert msgs(f) == [[1]]


def test_task_cancel_via_notification():
    t = Traffic()
    a = create(t)
    t.notify("notifications/cancelled", {"requestId": a})
    b = t.call("tools/call", {"name": "slow"})
    t.notify("notifications/cancelled", {"requestId": b})  # an ordinary request in flight
    f = t.run().of("task-cancel-via-notification")
    assert msgs(f) == [[0, 1, 2]] and "'t1'" in f[0].message


def listen(h: Traffic, notifications: dict, events: list) -> None:
    msg = h.request("subscriptions/listen", {"notifications": notifications}, caps=DECLARED)
    x = h.post(msg, headers=(*HTTP_HEADERS, ("mcp-protocol-version", VERSION), ("mcp-method", "subscriptions/listen")))
    h.respond_sse(x, events)


def test_task_stream_progress_or_log():
    h = Traffic("http")
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    listen(h, {"taskIds": ["t1"]}, [log])
    listen(h, {"toolsListChanged": True}, [log])
    f = h.run().of("task-stream-progress-or-log")
    assert msgs(f) == [[0, 1]] and "['t1']" in f[0].message


def test_tasks_result_not_method_not_found():
    t = Traffic()
    i = t.call("tasks/result", {"taskId": "t1"}, caps=DECLARED)
    t.result(i, {"content": []})
    i = t.call("tasks/result", {"taskId": "t1"}, caps=DECLARED)
    t.error(i, -32601, "Method not found")
    f = t.run().of("tasks-result-not-method-not-found")
    assert msgs(f) == [[0, 1]]


def test_task_shape_carries_request_state():
    t = Traffic()
    create(t, requestState="s1")
    poll(t, requestState="s1")
    create(t, "t2", inputRequests={"name": ASK_NAME})
    create(t, "t3")
    f = t.run().of("task-shape-carries-request-state")
    assert msgs(f) == [[1], [3], [5]]
    assert "CreateTaskResult" in f[0].message and "inputRequests" in f[2].message


def test_task_input_requests_undeclared_capability():
    t = Traffic()
    only_tasks = {"elicitation": {}, "extensions": {TASKS: {}}}
    i = t.call("tasks/get", {"taskId": "t1"}, caps=only_tasks)
    t.result(i, {**TASK, "status": "input_required", "inputRequests": {"sum": SAMPLE, "name": ELICIT}})
    asking(t, {"sum": SAMPLE})  # DECLARED has sampling
    f = t.run().of("task-input-requests-undeclared-capability")
    assert msgs(f) == [[0, 1]] and f[0].severity == "info" and "sampling" in f[0].message


def test_legacy_experimental_tasks_are_not_judged():
    """2025-11-25 experimental tasks (tasks/get, tasks/result) are another protocol."""
    t = Traffic()
    i = t.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO},
               with_meta=False)
    t.result(i, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": CLIENT_INFO},
             with_meta=False, result_type=None)
    i = t.call("tasks/result", {"taskId": "t1"}, with_meta=False)
    t.result(i, {"content": []}, with_meta=False, result_type=None)
    i = t.call("tasks/get", {"taskId": "t1"}, with_meta=False)
    t.result(i, {**TASK, "status": "input_required"}, with_meta=False, result_type=None)
    assert not {r for r in t.run().rules() if r.startswith("task")}


# --- 2025-11-25 tasks (RULES.md §13) --------------------------------------------------------------------------------


def _legacy_with_research_tool(support: str = "required"):
    from tests.rules.test_legacy import legacy_stdio

    t = legacy_stdio()
    ls = t.call("tools/list", with_meta=False)
    t.result(ls, {"tools": [{"name": "research", "inputSchema": {"type": "object"},
                             "execution": {"taskSupport": support}}]}, with_meta=False, result_type=None)
    return t


def test_legacy_task_required_not_used_and_wrong_error():
    t = _legacy_with_research_tool()
    a = t.call("tools/call", {"name": "research", "arguments": {"topic": "x"}}, with_meta=False)
    t.result(a, {"content": [{"type": "text", "text": "MCP error -32601: requires task augmentation"}], "isError": True},
             with_meta=False, result_type=None)
    r = t.run()
    (used,) = r.of("legacy-task-required-not-used")
    (wrong,) = r.of("legacy-task-required-wrong-error")
    assert used.messages == [5] and used.chain == "c1" and "'research'" in used.message
    assert wrong.messages == [5, 6] and wrong.chain == "c1" and "an isError result" in wrong.message
    assert used.spec == wrong.spec == "https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/tasks#tool-level-negotiation"


def test_near_miss_legacy_task_required_answered_with_32601_or_called_as_a_task():
    t = _legacy_with_research_tool()
    a = t.call("tools/call", {"name": "research", "arguments": {}}, with_meta=False)
    t.error(a, -32601, "Tool research requires task augmentation")  # the right answer: only the client is wrong
    b = t.call("tools/call", {"name": "research", "arguments": {}, "task": {"ttl": 60000}}, with_meta=False)
    t.result(b, {"task": {"taskId": "t1", "status": "working"}}, with_meta=False, result_type=None)
    r = t.run()
    assert [f.messages for f in r.of("legacy-task-required-not-used")] == [[5]]
    assert not r.of("legacy-task-required-wrong-error")


def test_near_miss_legacy_task_optional_tool_called_plainly():
    t = _legacy_with_research_tool("optional")
    a = t.call("tools/call", {"name": "research", "arguments": {}}, with_meta=False)
    t.result(a, {"content": [{"type": "text", "text": "done"}]}, with_meta=False, result_type=None)
    r = t.run()
    assert not r.of("legacy-task-required-not-used") and not r.of("legacy-task-required-wrong-error")
