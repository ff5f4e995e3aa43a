"""The rule reference: docs/rules.md in sync with the registry, the registry in line with the
catalog (RULES.md), and the `mrtr-inspect rules` listing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mrtr_inspect import docs
from mrtr_inspect.cli import main
from mrtr_inspect.core.findings import SEVERITIES, spec_url
from mrtr_inspect.rules.registry import Rule

ROOT = Path(__file__).resolve().parent.parent
RULES = docs.registered()

# Ids of the tool itself, not headed in RULES.md §4: the analysis failing, the upstream failing, a
# capture that began too late (§0, tag C), and the rules the §10 decisions added (their severities
# are in §10's prose, which `catalog()` reads too).
NOT_IN_CATALOG_HEADINGS = {
    "inspector-error", "upstream-error", "upstream-not-mcp", "message-too-large", "capture-incomplete",  # the tool's own (rules/tool.py)
    "retry-id-stringly-equal",  # §10.1
    "server-gave-up-after-rounds", "server-rejected-own-state", "tool-result-missing-structured-content",  # §10.5
    "duplicate-member-name",  # §7.23: "report duplicates from raw bytes everywhere, at info outside inputRequests"
    "legacy-server-request-unattached",  # §13: a question no evidence ties is "left unattached, and said so (info)"
    "server-rejected-unknown-key", "server-error-on-decline",  # §12: "warnings defined by this table"
    "client-ignored-state-only", "client-retry-storm", "client-answered-undeclared",  # §14: "defined by this table"
    "client-retried-after-32021", "client-hung",
    "hop-link-ambiguous",  # §11: "an ambiguous tie is never linked silently (`hop-link-ambiguous`, info)"
    # issue 30 (CONTRACTS.md third wave names the families definition-* and contract-*; RULES.md gives no ids yet)
    "definition-added", "definition-removed", "definition-description-changed", "definition-schema-breaking",
    "definition-schema-changed", "definition-annotation-riskier", "definition-annotation-changed", "definition-changed",
    "tool-poisoning-hidden-text", "tool-poisoning-instructions", "tool-poisoning-oversized",
    "contract-tool-not-offered", "contract-tool-not-called", "contract-tool-forbidden", "contract-rounds-exceeded",
    "contract-latency-exceeded", "contract-outcome-not-allowed", "contract-findings-exceeded",
}


# --- docs/rules.md ------------------------------------------------------------------------------------


def test_docs_rules_md_is_in_sync_with_the_registry():
    current = docs.RULES_MD.read_text(encoding="utf-8") if docs.RULES_MD.exists() else ""
    assert current == docs.render(RULES), (
        "docs/rules.md does not match the rule registry: after adding or changing a rule, run `make docs` "
        "(or `.venv/bin/python -m mrtr_inspect.docs`) and commit docs/rules.md"
    )


def test_docs_check_mode(tmp_path, capsys):
    target = tmp_path / "rules.md"
    assert docs.main(["--check", str(target)]) == 1  # missing
    assert docs.main([str(target)]) == 0
    assert target.read_text(encoding="utf-8") == docs.render(RULES)
    assert docs.main(["--check", str(target)]) == 0
    target.write_text(target.read_text(encoding="utf-8").replace("**error**", "**warning**", 1), encoding="utf-8")
    capsys.readouterr()
    assert docs.main(["--check", str(target)]) == 1
    assert "make docs" in capsys.readouterr().err


def _section_of_each_rule(text: str) -> dict[str, str]:
    """rule id -> the `## ` heading its `### ` section sits under."""
    out, heading = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:]
        m = re.match(r"### `([^`]+)`$", line)
        if m:
            assert m.group(1) not in out, f"{m.group(1)} documented twice"
            out[m.group(1)] = heading
    return out


def test_every_registered_rule_has_one_section_under_its_catalog_section():
    placed = _section_of_each_rule(docs.render(RULES))
    assert set(placed) == {r.id for r in RULES}
    for r in RULES:
        assert placed[r.id] == docs.section_title(r.section), r.id


def fake(id: str, section: str, **kw) -> Rule:
    kw.setdefault("summary", f"summary of {id}")
    return Rule(id=id, severity=kw.pop("severity", "error"), section=section, **kw)


def test_render_orders_sections_numerically_and_the_tool_last():
    rules = [fake("t", "tool"), fake("d", "10.5"), fake("b", "4.9"), fake("a", "4.1"), fake("c", "4.1"),
             fake("z", "0")]
    headings = [line for line in docs.render(rules).splitlines() if line.startswith("## ") and line != "## Contents"]
    assert headings == ["## §0 Conventions: capture completeness", "## §4.1 MRTR: the server side",
                        "## §4.9 Tasks extension interplay", "## §10.5 Decisions taken after review",
                        "## The tool's own findings"]
    ids = re.findall(r"^### `(\w)`$", docs.render(rules), flags=re.M)
    assert ids == ["z", "a", "c", "b", "d", "t"]  # registration order within a section


def _rule_block(text: str, rid: str) -> str:
    start = text.index(f"### `{rid}`")
    nxt = re.compile(r"^#{2,3} ", re.M).search(text, start + 4)
    return text[start: nxt.start() if nxt else len(text)]


def test_render_shows_what_why_example_spec_and_conformance():
    r = fake("x-rule", "4.2", spec="basic/patterns/mrtr.mdx#client-requirements-basic-workflow",
             conformance="sep-2322-client-x", doc="Detects `x` | and more.", why="Because.", example="a ```b``` c",
             quote="Clients MUST x.", severity="warning")
    block = _rule_block(docs.render([r]), "x-rule")
    assert "summary of x-rule" in block
    assert "**warning**" in block
    assert f"[{r.spec}]({spec_url(r.spec)})" in block
    assert "`sep-2322-client-x`" in block
    assert "**What it detects.** Detects `x` | and more." in block
    assert "**Why it matters.** Because." in block
    assert "> Clients MUST x." in block
    assert "````text\na ```b``` c\n````" in block  # the fence outgrows the example's backticks
    table_row = next(line for line in docs.render([r]).splitlines() if line.startswith("| [`x-rule`]"))
    assert table_row == "| [`x-rule`](#x-rule) | warning | summary of x-rule |"


def test_render_marks_declared_rules():
    hidden = fake("hidden", "4.5", observable=False)
    child = fake("child", "4.2", severity="info", emitted_by="parent")
    plain = fake("plain", "4.2")
    text = docs.render([hidden, child, plain])
    assert "Not observable passively" in _rule_block(text, "hidden")
    assert "Reported by the check of [`parent`](#parent)" in _rule_block(text, "child")
    assert "Not observable" not in _rule_block(text, "plain") and "Reported by" not in _rule_block(text, "plain")
    assert "- Conformance check: none" in _rule_block(text, "plain")
    assert "- Specification: none" in _rule_block(text, "plain")


def test_every_rule_documents_why_and_checks_have_an_example():
    for r in RULES:
        assert r.summary.strip() and r.section, f"{r.id}: summary and section are required"
        assert r.why.strip(), f"{r.id}: no `why` (it goes into docs/rules.md)"
        if r.check is not None:
            assert r.example.strip(), f"{r.id}: no `example` (it goes into docs/rules.md)"
            assert r.doc.strip(), f"{r.id}: no docstring (what it detects, in docs/rules.md)"


# --- the registry against RULES.md ---------------------------------------------------------------------


def rules_md() -> Path | None:
    """RULES.md: $MRTR_RULES_MD, else the shared folder beside the repository."""
    env = os.environ.get("MRTR_RULES_MD")
    path = Path(env) if env else ROOT.parent / "shared" / "RULES.md"
    return path if path.is_file() else None


_ENTRY = re.compile(r"`([a-z0-9][a-z0-9-]*)` — ([^\n]*)")
_SECTION = re.compile(r"^### (\d+(?:\.\d+)*) |^## (1[1-9])\. ", re.M)  # §4.x, and the sections added after §10


def catalog(text: str) -> dict[str, tuple[str | None, str | None]]:
    """id -> (default severity, § of its `####` heading) from RULES.md: the `#### \\`id\\` — severity …`
    headings, and the `\\`id\\` — severity` phrases of the §10 decisions (no heading). The severity is
    the first level named after the dash (None for a `✗` rule that names none)."""
    out: dict[str, tuple[str | None, str | None]] = {}
    sections = [(m.start(), m.group(1) or m.group(2)) for m in _SECTION.finditer(text)]
    for m in _ENTRY.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        heading = text.startswith("#### ", line_start)
        levels = re.findall(r"\b(error|warning|info)\b", m.group(2))
        if not heading and not levels:
            continue  # a mention in prose, not a definition
        section = next((s for pos, s in reversed(sections) if pos < m.start()), None) if heading else None
        out.setdefault(m.group(1), (levels[0] if levels else None, section))
    return out


@pytest.fixture(scope="module")
def cat():
    path = rules_md()
    if path is None:
        pytest.skip("RULES.md not found (set MRTR_RULES_MD, or keep the shared folder beside the repository)")
    return catalog(path.read_text(encoding="utf-8"))


def test_catalog_parser_reads_headings_and_decisions():
    text = (
        "### 4.2 MRTR — client side\n\n#### `retry-reused-id` — error\n- **Detect:** x `other-id` — nothing\n"
        "#### `some-heuristic` — warning (*derived*)\n#### `hidden` — ✗ (error if observable)\n"
        "#### `hidden-any` — ✗ / config\n#### `split` — error (tasks/get) / warning (update, cancel)\n"
        "## 10. Decisions\n1. **`stringly` — info.** A retry…\n   - `gave-up` — warning. A chain…\n"
    )
    assert catalog(text) == {
        "retry-reused-id": ("error", "4.2"), "some-heuristic": ("warning", "4.2"), "hidden": ("error", "4.2"),
        "hidden-any": (None, "4.2"), "split": ("error", "4.2"), "stringly": ("info", None), "gave-up": ("warning", None),
    }


def test_every_registered_id_is_in_the_catalog(cat):
    unknown = sorted(r.id for r in RULES if r.id not in cat and r.id not in NOT_IN_CATALOG_HEADINGS)
    assert not unknown, f"ids not in RULES.md (spell them as the catalog does): {unknown}"


def test_default_severities_match_the_catalog(cat):
    wrong = {r.id: (r.severity, cat[r.id][0]) for r in RULES
             if r.id in cat and cat[r.id][0] is not None and r.severity != cat[r.id][0]}
    assert not wrong, f"registered severity vs RULES.md default: {wrong}"


def test_sections_match_the_catalog_headings(cat):
    wrong = {r.id: (r.section, cat[r.id][1]) for r in RULES
             if r.id in cat and cat[r.id][1] is not None and r.section != cat[r.id][1]}
    assert not wrong, f"Rule.section vs the RULES.md § of its heading: {wrong}"


# --- mrtr-inspect rules --------------------------------------------------------------------------------


def invoke(*args: str):
    return CliRunner().invoke(main, ["rules", *args])


@pytest.fixture
def empty_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configuration file applies
    return tmp_path


def test_rules_text_lists_every_rule_under_its_section(empty_dir):
    r = invoke()
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    heading = None
    seen = {}
    for line in lines:
        if line and not line.startswith(" "):
            heading = line
        elif line.startswith("  "):
            rid, sev, summary = re.match(r"  (\S+)\s+(\S+)\s+(.*)$", line).groups()
            seen[rid] = (heading, sev, summary)
    by_id = {r.id: r for r in RULES}
    assert set(seen) == set(by_id)
    for rid, (heading, sev, summary) in seen.items():
        rule = by_id[rid]
        assert heading == docs.section_title(rule.section)
        assert sev == rule.severity
        assert summary.startswith(rule.summary)
    assert lines[-1] == f"{len(RULES)} rules, 0 disabled, 0 with a changed severity"


def test_rules_json_has_the_documented_fields(empty_dir):
    r = invoke("--format", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [row["id"] for row in rows] == [x.id for _, rs in docs.grouped(RULES) for x in rs]
    by_id = {x.id: x for x in RULES}
    for row in rows:
        x = by_id[row["id"]]
        assert row == {
            "id": x.id, "severity": x.severity, "default_severity": x.severity, "disabled": False,
            "section": x.section, "summary": x.summary, "spec": spec_url(x.spec), "conformance": x.conformance,
            "observable": x.observable, "emitted_by": x.emitted_by,
        }
        assert row["severity"] in SEVERITIES


def test_rules_apply_options_and_configuration_file(empty_dir):
    a, b, c = RULES[1].id, RULES[2].id, RULES[3].id
    (empty_dir / ".mrtr-inspect.toml").write_text(f'disable = ["{a}"]\nseverity = {{"{b}" = "info"}}\n')
    new_level = next(s for s in SEVERITIES if s != RULES[3].severity)
    r = invoke("--format", "json", "--severity", f"{c}={new_level}")
    rows = {row["id"]: row for row in json.loads(r.stdout)}
    assert rows[a]["disabled"] is True
    assert (rows[b]["severity"], rows[b]["default_severity"], rows[b]["disabled"]) == ("info", RULES[2].severity, False)
    assert rows[c]["severity"] == new_level
    text = invoke("--severity", f"{c}={new_level}").stdout
    assert re.search(rf"^  {re.escape(a)}\s+disabled\s", text, re.M)
    assert re.search(rf"^  {re.escape(c)}\s+{new_level} \(default {RULES[3].severity}\)\s", text, re.M)
    changed = 1 + (RULES[2].severity != "info")
    assert text.splitlines()[-1] == f"{len(RULES)} rules, 1 disabled, {changed} with a changed severity"


def test_rules_marks_rules_not_observable_passively(empty_dir, monkeypatch):
    hidden = fake("passive-blind", "4.5", observable=False, summary="Cannot be seen.")
    monkeypatch.setattr(docs, "registered", lambda: [*RULES, hidden])
    rows = {row["id"]: row for row in json.loads(invoke("--format", "json").stdout)}
    assert rows["passive-blind"]["observable"] is False
    assert "  passive-blind" in (out := invoke().stdout)
    assert "Cannot be seen. (not observable passively)" in out


def test_rules_rejects_unknown_ids_and_levels(empty_dir):
    for args in (["--disable", "no-such-rule"], ["--severity", f"{RULES[0].id}=loud"]):
        r = invoke(*args)
        assert r.exit_code == 2
        assert r.stderr.startswith("mrtr-inspect: ") and len(r.stderr.splitlines()) == 1
