"""The runtime's "openacl" logger: made on first use (a run that logs nothing never imports
``logging``), with the level ``init`` was configured with."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)


def test_a_run_that_logs_nothing_never_imports_logging():
    done = _run("import sys, openacl\n"
                "openacl.init({'backend': 'cpu'})\n"
                "openacl.finalize()\n"
                "print('logging' in sys.modules)")
    assert done.stdout.strip() == "False"


def test_the_configured_level_reaches_the_logger_made_later_or_at_once():
    done = _run("import openacl\n"
                "from openacl import log\n"
                "openacl.init({'log_level': 'error'})\n"
                "import logging\n"
                "print(log.logger().level, log.enabled('warning'), log.enabled('error'))\n"
                "openacl.finalize()\n"
                "openacl.init({'log_level': 'null'})\n"  # logging imported now: at once
                "print(logging.getLogger('openacl').level)\n"
                "openacl.finalize()")
    assert done.stdout.split() == ["40", "False", "True", "51"]


def test_info_level_logs_the_initialisation():
    done = _run("import logging\n"
                "logging.basicConfig(level=logging.DEBUG)\n"
                "import openacl\n"
                "openacl.init({'log_level': 'info'})\n"
                "openacl.finalize()")
    assert "openacl initialised" in done.stderr
    quiet = _run("import logging\n"
                 "logging.basicConfig(level=logging.DEBUG)\n"
                 "import openacl\n"
                 "openacl.init({'log_level': 'warning'})\n"
                 "openacl.finalize()")
    assert "openacl initialised" not in quiet.stderr
