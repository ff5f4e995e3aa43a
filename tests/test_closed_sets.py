"""The closed sets (directions, eras, severities, outcomes, link kinds; issue 26) are named by their
`StrEnum` members, never by a string literal of a member's value: a ratchet read with `ast` over all
of mrtr_inspect/, no traffic involved.

A string constant equal to a member's value is a closed-set literal where it is compared (`==`,
`!=`, `in`, alone or in a tuple), a dict's key, a parameter's default, a keyword argument, a `.get`
default or an index, and either

- the value is no other word of the code (`c2s`, `s2c`, `modern`, `legacy`, `abandoned`; `warning`
  is one of MCP's log levels too),
- or what it meets names a closed set (`x.severity == "error"`, `fail_on="error"`, `sev["info"]`),
- or it stands with other members of the same set and nothing else (`("error", "warning", "info")`,
  `{"complete": …, "error": …}`).

A direction (`c2s`, `s2c`) is one wherever it is used (`log.line("c2s", data)`). But
`resp == "error"` (a response's kind), `{"jsonrpc": "2.0", "error": …}` (JSON-RPC) and
`result.get("resultType") == "complete"` (MCP's result type) are not: the same words, other sets.
Text is not either: docstrings, f-strings, help, `plural(n, "warning")`. What the command line
takes stays a list of strings where click builds its help from it (`--fail-on` also takes `never`);
a `Literal[...]` of a wire schema (agent/server.py) must hold exactly one whole set.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mrtr_inspect.core.era import Era
from mrtr_inspect.core.events import Direction
from mrtr_inspect.core.findings import Severity
from mrtr_inspect.core.vocabulary import Link, Outcome

PACKAGE = Path(__file__).resolve().parent.parent / "mrtr_inspect"
SETS = {e.__name__: frozenset(m.value for m in e) for e in (Direction, Era, Severity, Outcome, Link)}
VALUES = frozenset().union(*SETS.values())
#: values no other vocabulary of the code compares or keys by: one of them there is the closed set
UNAMBIGUOUS = frozenset({"c2s", "s2c", "modern", "legacy", "abandoned"})
#: a direction's value is a closed-set literal anywhere it is used: `log.line("c2s", data)` too
DIRECTIONS = frozenset(SETS["Direction"])
#: names that hold a closed-set value
FIELDS = frozenset({"direction", "directions", "era", "eras", "severity", "sev", "outcome", "outcomes", "link", "via",
                    "fail_on", "min_severity"})

#: core/ and rules/ still name a closed set by its value here and there (a rule's `directions=["s2c"]`,
#: `c.outcome == "error"`): at most this many, and no new one.
#: Lower it when a change converts some (83 when the rest of the package reached none; 78 once the stitched
#: eras became a set of members).
CORE_AND_RULES = 78

#: (path under mrtr_inspect/, value, why): the literals that are right as they are
ALLOWED = {
    ("ui/app.py", "error", "Textual's own notify(severity=...), not a finding's"),
}


def _name(node: ast.AST) -> str | None:
    """The name an expression reads: `x`, `a.x`, `a["x"]`, `a.get("x")`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and type(node.slice.value) is str:
        return node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args and isinstance(node.args[0], ast.Constant) and type(node.args[0].value) is str:
        return node.args[0].value
    return None


def _strings(node: ast.AST | None) -> list[ast.Constant]:
    if isinstance(node, ast.Constant) and type(node.value) is str:
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and type(e.value) is str]
    return []


def _one_set(consts: list[ast.Constant], others: int = 0) -> bool:
    """Two or more members of one set, and nothing else beside them."""
    values = {c.value for c in consts}
    return not others and len(values) >= 2 and any(values <= s for s in SETS.values())


def closed_set_literals(source: str) -> list[tuple[int, str, str]]:
    """(line, value, where) of each closed-set literal of a module's source."""
    found: dict[ast.Constant, str] = {}

    def add(consts: list[ast.Constant], where: str, named: bool = False, shaped: bool = False) -> None:
        for c in consts:
            if c.value in VALUES and (c.value in UNAMBIGUOUS or named or shaped):
                found.setdefault(c, where)

    tree = ast.parse(source)
    literal_types = set()
    text = set()  # docstrings, the pieces of f-strings, and the members' own values in their enums
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expr, ast.JoinedStr)):
            text.update(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.Constant))
        elif isinstance(node, ast.ClassDef) and any(_name(b) in ("StrEnum", "Enum") for b in node.bases):
            text.update(a.value for a in node.body if isinstance(a, ast.Assign))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in DIRECTIONS and node not in text:
            found.setdefault(node, "used")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
            consts = _strings(node.slice)
            literal_types.update(consts)
            values = {c.value for c in consts}
            if values & VALUES and values not in SETS.values():
                found.update((c, "a Literal that is not exactly one closed set") for c in consts)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(_name(s) in FIELDS for s in sides)
            for s in sides:
                consts = _strings(s)
                add(consts, "compared", named, _one_set(consts, len(getattr(s, "elts", ())) - len(consts)))
        elif isinstance(node, ast.Dict):
            consts = [k for k in node.keys if isinstance(k, ast.Constant) and type(k.value) is str]
            add(consts, "a dict key", shaped=_one_set(consts, len(node.keys) - len(consts)))
        elif isinstance(node, ast.arguments):
            params = [*node.posonlyargs, *node.args]
            pairs = [*zip(params[len(params) - len(node.defaults):], node.defaults),
                     *((a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None)]
            for a, d in pairs:
                add(_strings(d), "a default", a.arg in FIELDS)
        elif isinstance(node, ast.Call):
            for k in node.keywords:
                add(_strings(k.value), "a keyword argument", k.arg in FIELDS)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and len(node.args) == 2:
                add(_strings(node.args[1]), "a .get default", _name(node) in FIELDS)
        elif isinstance(node, ast.Subscript):
            add(_strings(node.slice), "an index", _name(node.value) in FIELDS)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            consts = _strings(node)
            if len(consts) == len(node.elts) and _one_set(consts):
                add(consts, "a tuple of one set", shaped=True)
    for c in literal_types:
        if found.get(c) != "a Literal that is not exactly one closed set":
            found.pop(c, None)
    return sorted((c.lineno, c.value, where) for c, where in found.items())


def scan(package: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        for line, value, where in closed_set_literals(path.read_text(encoding="utf-8")):
            if not any(rel == p and value == v for p, v, _ in ALLOWED):
                out.append(f"{rel}:{line}: {value!r} ({where})")
    return out


def _inner(line: str) -> bool:
    return line.startswith(("core/", "rules/"))


def test_no_closed_set_is_named_by_a_string_literal_outside_the_core_and_the_rules():
    found = [line for line in scan() if not _inner(line)]
    assert not found, "name the closed set's member (Severity.ERROR, Direction.C2S…), not its value:\n" + \
        "\n".join(found)


def test_the_core_and_the_rules_name_closed_sets_by_their_values_no_more_than_they_did():
    found = [line for line in scan() if _inner(line)]
    assert len(found) <= CORE_AND_RULES, \
        f"{len(found)} closed-set literals in core/ and rules/, at most {CORE_AND_RULES}: name the members\n" + \
        "\n".join(found)


def test_every_allowed_literal_is_still_there():
    for rel, value, why in ALLOWED:
        assert any(v == value for _, v, _ in closed_set_literals((PACKAGE / rel).read_text(encoding="utf-8"))), \
            f"{rel}: {value!r} is allowed ({why}) but no longer there: drop it from ALLOWED"


def test_the_scan_sees_each_kind_of_closed_set_literal_and_not_the_same_words_of_other_sets():
    source = '''
def f(m, c, counts, resp, msg, fail_on="error", *, min_severity="warning", mode="open"):
    a = m.direction == "c2s"
    b = c.get("outcome") != "abandoned"
    d = m.severity in ("error", "warning")
    e = {"complete": "green", "task": "cyan"}
    g = Printer(min_severity="info")
    h = opts.get("fail_on", "warning")
    i = sev["info"]
    for s in ("error", "warning", "info"):
        pass
    x: Literal["c2s", "s2c"] = "c2s"
    y: Literal["error", "warning"] = "error"
    # the same words in other sets, and text
    n = resp == "error" or msg.kind in ("result", "error") or result.get("resultType") == "complete"
    o = {"jsonrpc": "2.0", "id": 1, "error": {}}
    p = f"{plural(n, 'warning')}" + "a docstring-like text: error, warning"
    q = click.Choice(["error", "warning", "info", "never"])
    r = {"time": 1.0, "index": 2, "params": {}}
    log.line("s2c", data)


class Direction(StrEnum):
    C2S = "c2s"
'''
    got = closed_set_literals(source)
    assert [(line, v) for line, v, _ in got] == [
        (2, "error"), (2, "warning"),  # fail_on, min_severity defaults ("open" of `mode` is not one)
        (3, "c2s"), (4, "abandoned"), (5, "error"), (5, "warning"), (6, "complete"), (6, "task"),
        (7, "info"), (8, "warning"), (9, "info"), (10, "error"), (10, "info"), (10, "warning"),
        (12, "c2s"),  # the value given, not the Literal of the whole set
        (13, "error"), (13, "warning"),  # a Literal of a part of a set
        (20, "s2c"),  # a direction anywhere (its own enum aside)
    ]
    assert {w for _, _, w in got} == {"a default", "compared", "a dict key", "a keyword argument",
                                      "a .get default", "an index", "a tuple of one set",
                                      "a Literal that is not exactly one closed set", "used"}
