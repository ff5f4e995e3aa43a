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
    assert "addons = [HostGuard(), MrtrInspect()]" in path.read_text()


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


# ---- issue 25 item 12: a mitmproxy whose Python lacks mrtr-inspect (pipx, Homebrew) says how to install it

SITE = next(p for p in sys.path if p.endswith("site-packages"))

MITMDUMP_WITHOUT_MRTR_INSPECT = """
import sys
sys.path.append({site!r})  # mitmproxy and the rest, without the .pth files: the editable mrtr-inspect is not there
{setup}
from mitmproxy.tools.main import mitmdump
sys.argv = ["mitmdump", "-n", "-r", "none.mitm", "-s", {script!r}, "--set", "confdir=conf"]
mitmdump()
"""


def _mitmdump_without(tmp_path: Path, script: Path, setup: str = "") -> subprocess.CompletedProcess:
    (tmp_path / "none.mitm").write_bytes(b"")
    code = MITMDUMP_WITHOUT_MRTR_INSPECT.format(site=SITE, setup=setup, script=str(script))
    return subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def _the_line(done: subprocess.CompletedProcess) -> str:
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # mitmproxy stops on an error logged at startup
    assert "Traceback" not in out and "ModuleNotFoundError" not in out, out
    (line,) = [line for line in out.splitlines() if "mrtr-inspect" in line and "Loading script" not in line]
    return line.split("] ", 1)[-1]  # without mitmproxy's time stamp


def test_a_mitmproxy_without_mrtr_inspect_says_in_one_line_how_to_install_it_into_its_python(tmp_path):
    line = _the_line(_mitmdump_without(tmp_path, addon_path()))
    assert line == (f"mrtr-inspect: the addon cannot load: this mitmproxy's Python ({sys.executable}) has no module "
                    f"'mrtr_inspect': install mrtr-inspect into that Python: `pip --python {sys.executable} install "
                    "mrtr-inspect` (a mitmproxy installed by pipx: `pipx inject mitmproxy mrtr-inspect`)")


def test_in_a_pipx_mitmproxy_the_line_is_pipx_inject(tmp_path):
    pipx = "/home/u/.local/share/pipx/venvs/mitmproxy"
    line = _the_line(_mitmdump_without(tmp_path, addon_path(), setup=f"sys.prefix = {pipx!r}"))
    assert line.endswith("has no module 'mrtr_inspect': install mrtr-inspect into it: "
                         "`pipx inject mitmproxy mrtr-inspect`"), line


def test_the_checkout_addon_names_a_missing_dependency_in_one_line(tmp_path):
    line = _the_line(_mitmdump_without(tmp_path, ROOT / "addons" / "mrtr_inspect.py",
                                       setup="sys.modules['rich'] = None  # a dependency mitmproxy's Python lacks"))
    assert "this mitmproxy's Python" in line and "has no module 'rich': install mrtr-inspect into that Python" in line
