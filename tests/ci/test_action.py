"""The GitHub Action (action.yml): its steps' shell run here, in a temporary workspace with the
variables GitHub sets (GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, RUNNER_TEMP…), as the runner runs a
composite action: each `run` step in bash (`-eo pipefail`), its `${{ }}` expressions and `if:`
conditions evaluated, the outputs of a step read back from GITHUB_OUTPUT.

`actions/setup-python` is stood in for by a fresh virtual environment first on PATH (its
site-packages sees the dependencies of this one, so the install step builds and installs
mrtr-inspect itself, from a copy of the repository, as the action does from its checkout); the
SARIF upload is stood in for by reading the file it would upload."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "test_sdk_http" / "test_the_client_completes_every_chain.jsonl"
CONTEXT = re.compile(r"\b(inputs|steps|github)\.([A-Za-z0-9_.-]+)")


def evaluate(expr: str, ctx: dict):
    """A GitHub expression of the forms action.yml uses: contexts, string literals, ==, !=, &&, ||, always()."""
    def value(m: re.Match) -> str:
        kind, path = m.group(1), m.group(2)
        if kind == "inputs":
            return repr(ctx["inputs"].get(path, ""))
        if kind == "github":
            return repr(ctx["github"][path])
        step, _, name = path.partition(".outputs.")
        return repr(ctx["steps"].get(step, {}).get(name, ""))

    py = CONTEXT.sub(value, expr).replace("&&", " and ").replace("||", " or ").replace("always()", "True")
    return eval(py, {"__builtins__": {}}, {})  # noqa: S307 - the test's own expressions, from action.yml


def substitute(text, ctx: dict) -> str:
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: str(evaluate(m.group(1), ctx)), str(text))


def run_action(action: dict, inputs: dict, python_bin: Path, action_path: Path, workspace: Path) -> dict:
    """Run the action's steps; returns the context (step outputs, failed step, summary)."""
    defaults = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    ctx = {"inputs": {**defaults, **inputs}, "github": {"action_path": str(action_path)}, "steps": {},
           "failed": None, "uploaded": None}
    temp = workspace / "_runner_temp"
    temp.mkdir(exist_ok=True)
    summary, output = temp / "step_summary.md", temp / "output"
    summary.write_text("")
    for step in action["runs"]["steps"]:
        if "if" in step and not evaluate(re.sub(r"^\$\{\{|\}\}$", "", step["if"].strip()), ctx):
            continue
        if "uses" in step:
            if step["uses"].startswith("github/codeql-action/upload-sarif"):
                # the upload reads the file relative to the workspace, as the runner resolves it
                ctx["uploaded"] = (workspace / substitute(step["with"]["sarif_file"], ctx)).resolve()
            else:
                assert step["uses"].startswith("actions/setup-python"), step["uses"]
            continue
        output.write_text("")
        env = {**os.environ, "PATH": f"{python_bin}{os.pathsep}{os.environ['PATH']}", "GITHUB_STEP_SUMMARY": str(summary),
               "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(temp), "GITHUB_WORKSPACE": str(workspace),
               "GITHUB_ACTION_PATH": str(action_path), "CI": "true", "GITHUB_ACTIONS": "true",
               **{k: substitute(v, ctx) for k, v in (step.get("env") or {}).items()}}
        env.pop("VIRTUAL_ENV", None)
        env.pop("PYTHONPATH", None)
        cwd = workspace / substitute(step.get("working-directory", "."), ctx)
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=600)
        outs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        if "id" in step:
            ctx["steps"][step["id"]] = outs
        if done.returncode != 0:
            ctx["failed"] = (step["name"], done.returncode, done.stdout + done.stderr)
            break
    ctx["summary"] = summary.read_text()
    return ctx


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The repository as the action's checkout, and a fresh Python (the setup-python step) whose
    install step is run once here."""
    base = tmp_path_factory.mktemp("action")
    action_path = base / "action"
    action_path.mkdir()
    for name in ("pyproject.toml", "README.md", "action.yml"):
        shutil.copy(ROOT / name, action_path / name)
    shutil.copytree(ROOT / "mrtr_inspect", action_path / "mrtr_inspect",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = base / "python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    action = yaml.safe_load((action_path / "action.yml").read_text())
    install = next(s for s in action["runs"]["steps"] if s.get("name") == "Install mrtr-inspect")
    ctx = {"inputs": {}, "github": {"action_path": str(action_path)}, "steps": {}}
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
           **{k: substitute(v, ctx) for k, v in install["env"].items()}}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", install["run"]], cwd=base, env=env,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0 and ("setuptools" in done.stdout + done.stderr and "No matching distribution" in
                                 done.stdout + done.stderr):
        pytest.skip("the install step cannot fetch setuptools to build mrtr-inspect (no package index reachable)")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (venv / "bin" / "mrtr-inspect").exists()
    return action, venv / "bin", action_path


def workspace(tmp_path: Path, python_bin: Path, contract: str) -> Path:
    ws = tmp_path / "ws"
    (ws / "recordings").mkdir(parents=True)
    shutil.copy(FIXTURE, ws / "recordings" / "run.jsonl")
    subprocess.run([str(python_bin / "mrtr-inspect"), "baseline", "save", "recordings/run.jsonl", "--output",
                    "mcp-baseline.json"], cwd=ws, check=True, capture_output=True, timeout=300)
    (ws / "contract.toml").write_text(contract)
    return ws


def test_the_action_runs_green_on_a_run_that_holds_its_baseline_and_contract(installed, tmp_path):
    action, python_bin, action_path = installed
    ws = workspace(tmp_path, python_bin, 'called = ["deploy"]\nmax_rounds = 3\n')
    ctx = run_action(action, {"recordings": "recordings/*.jsonl", "baseline": "mcp-baseline.json",
                              "contract": "contract.toml"}, python_bin, action_path, ws)
    assert ctx["failed"] is None
    assert ctx["steps"]["check"] == {"sarif": "mrtr-inspect.sarif", "exit-code": "0"}
    assert ctx["summary"].startswith("## ✅ mrtr-inspect: 0 errors, 0 warnings, 8 infos")
    assert "| c1 | tools/call | deploy |" in ctx["summary"]
    sarif = json.loads(ctx["uploaded"].read_text())
    assert ctx["uploaded"] == (ws / "mrtr-inspect.sarif").resolve()
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["tool"]["driver"]["name"] == "mrtr-inspect"


def test_the_action_fails_on_the_given_level_after_the_summary_and_the_sarif(installed, tmp_path):
    action, python_bin, action_path = installed
    ws = workspace(tmp_path, python_bin, 'forbidden = ["slow_*"]\n')
    ctx = run_action(action, {"recordings": "recordings/run.jsonl", "contract": "contract.toml"}, python_bin,
                     action_path, ws)
    assert ctx["steps"]["check"]["exit-code"] == "1"
    assert ctx["failed"][0] == "Fail on ${{ inputs.fail-on }}" and ctx["failed"][1] == 1
    assert "findings at or above error" in ctx["failed"][2]
    assert "### Errors (1)" in ctx["summary"] and "contract\\-tool\\-forbidden" not in ctx["summary"]
    assert "`contract-tool-forbidden`" in ctx["summary"]
    results = json.loads(ctx["uploaded"].read_text())["runs"][0]["results"]
    assert [r["ruleId"] for r in results if r["level"] == "error"] == ["contract-tool-forbidden"]
    # the same run with fail-on never passes
    assert run_action(action, {"recordings": "recordings/run.jsonl", "contract": "contract.toml", "fail-on": "never"},
                      python_bin, action_path, ws)["failed"] is None


def test_bad_input_fails_the_check_step_with_its_reason(installed, tmp_path):
    action, python_bin, action_path = installed
    ws = workspace(tmp_path, python_bin, "max_round = 3\n")
    ctx = run_action(action, {"recordings": "recordings/run.jsonl", "contract": "contract.toml"}, python_bin,
                     action_path, ws)
    assert ctx["failed"][:2] == ("Check the recordings", 2)
    assert "did you mean 'max_rounds'?" in ctx["failed"][2]
    assert ctx["uploaded"] is None  # nothing to upload: the step wrote no output
    ctx = run_action(action, {"recordings": "nothing/*.jsonl"}, python_bin, action_path, ws)
    assert ctx["failed"][:2] == ("Check the recordings", 2)
