"""The mitmproxy addon for pip users: the wheel ships it, `mrtr-inspect addon-path` names it, and
stock mitmdump loads it from there (`mitmdump -s "$(mrtr-inspect addon-path)"`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MITMDUMP = Path(sys.executable).with_name("mitmdump")


def addon_path() -> Path:
    done = subprocess.run([sys.executable, "-m", "mrtr_inspect", "addon-path"], capture_output=True, text=True,
                          timeout=60, check=True)
    return Path(done.stdout.strip())


def test_addon_path_names_the_packaged_script():
    path = addon_path()
    assert path == ROOT / "mrtr_inspect" / "addon.py" and path.is_file()
    assert "addons = [MrtrInspect()]" in path.read_text()


def test_the_wheel_contains_the_addon(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "mrtr_inspect", src / "mrtr_inspect", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                           str(src)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and "satisfies the requirement setuptools" in done.stderr:
        pytest.skip(f"pip cannot build a wheel here (setuptools cannot be had): {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("mrtr_inspect-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read("mrtr_inspect/addon.py") == (ROOT / "mrtr_inspect" / "addon.py").read_bytes()


def test_stock_mitmdump_loads_it_from_there(tmp_path):
    flows = tmp_path / "none.mitm"
    flows.write_bytes(b"")
    report = tmp_path / "report.json"
    done = subprocess.run([str(MITMDUMP), "-n", "-r", str(flows), "-s", str(addon_path()),
                           "--set", f"confdir={tmp_path / 'conf'}", "--set", f"mrtr_report={report}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Loading script {addon_path()}" in done.stdout
    assert json.loads(report.read_text())["format"] == "mrtr-inspect.report/1"  # the addon ran and wrote it
