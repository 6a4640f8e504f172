from __future__ import annotations

import sys

from core.cli import main

sys.exit(main())
