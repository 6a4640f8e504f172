#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["ingest"]:
        # An ingest that finds every recording unchanged, told before Django starts.
        from blobviewer.ingest.quick_check import answered_before_django

        if answered_before_django(sys.argv[2:]):
            return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blobviewer.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
