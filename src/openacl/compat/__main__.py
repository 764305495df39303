"""``python -m openacl.compat SCRIPT.py ARGS...``: run an unchanged pyACL program."""

from __future__ import annotations

import sys

from openacl.compat.runner import main

if __name__ == "__main__":
    sys.exit(main())
