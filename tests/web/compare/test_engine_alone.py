"""The compare engine is plain Python: it imports, and runs, without Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_engine_imports_without_django() -> None:
    code = (
        "import sys\n"
        "import blobviewer.compare.alignment, blobviewer.compare.line_sources\n"
        "import blobviewer.compare.output_diff, blobviewer.compare.step_keys\n"
        "assert 'django' not in sys.modules, sorted(m for m in sys.modules if 'django' in m)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
