import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

JOBS = os.path.join(os.path.dirname(__file__), "jobs")


def hvdrun():
    here = os.path.join(sysconfig.get_path("scripts"), "hvdrun")
    return here if os.access(here, os.X_OK) else shutil.which("hvdrun")


@pytest.fixture
def run_job():
    """Runs tests/jobs/<name>.py (with `args`) on `np` ranks under hvdrun; returns (exit
    code, output)."""
    launcher = hvdrun()
    if launcher is None:
        pytest.fail("hvdrun is not installed: install the hvd wheel (hvd-python/build-wheel)")

    def run(name, np=2, launcher_args=(), env=None, args=()):
        command = [launcher, *launcher_args, "-np", str(np), sys.executable,
                   os.path.join(JOBS, f"{name}.py"), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **(env or {})})
        return done.returncode, done.stdout + done.stderr
    return run
