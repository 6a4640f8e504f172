"""core never imports Django (STYLE 1): every module under core/ imports in a fresh
interpreter without pulling django into sys.modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import importlib, json, pkgutil, sys
import core
names = sorted(m.name for m in pkgutil.walk_packages(core.__path__, "core."))
names = [n for n in names if n != "core.__main__"]  # running it would start the CLI
for name in names:
    importlib.import_module(name)
django = sorted(m for m in sys.modules if m.split(".")[0] == "django")
print(json.dumps({"modules": names, "django": django}))
"""


def test_no_core_module_imports_django() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = {f"core.{path.stem}" for path in (REPO / "core").glob("*.py")} - {
        "core.__init__",
        "core.__main__",
    }
    assert expected <= set(report["modules"])
    assert report["django"] == []


def test_core_source_never_mentions_a_django_import() -> None:
    for path in (REPO / "core").rglob("*.py"):
        source = path.read_text()
        assert "import django" not in source and "from django" not in source, path
