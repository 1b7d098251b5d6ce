import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

JOBS = os.path.join(os.path.dirname(__file__), "jobs")


def installed(program):
    """A program of the Python environment running the tests (hvdrun, horovodrun), else
    of PATH; None when neither has it."""
    here = os.path.join(sysconfig.get_path("scripts"), program)
    return here if os.access(here, os.X_OK) else shutil.which(program)


def hvdrun():
    return installed("hvdrun")


def mpirun():
    """mpirun with the options a 2-rank job on this host needs; a failure under CI when
    it is missing, else a skip naming the install command."""
    found = shutil.which("mpirun")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("mpirun is not installed (apt-get install openmpi-bin)")
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin)")
    return [found, "--oversubscribe", "-np", "2"]


# Open MPI refuses to start as root without these.
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def two_ranks(launcher):
    """The command line of a 2-rank Python job on this host under `launcher` (hvdrun,
    horovodrun or mpirun), up to the script."""
    if launcher == "mpirun":
        return [*mpirun(), sys.executable]
    found = installed(launcher)
    if found is None:
        pytest.fail(f"{launcher} is not installed: install the hvd wheel "
                    "(hvd-python/build-wheel)")
    extra = ["-H", "localhost:2"] if launcher == "horovodrun" else []
    return [found, "-np", "2", *extra, sys.executable]


@pytest.fixture
def run_job():
    """Runs tests/jobs/<name>.py (with `args`) on `np` ranks under hvdrun; returns (exit
    code, output)."""
    launcher = hvdrun()
    if launcher is None:
        pytest.fail("hvdrun is not installed: install the hvd wheel (hvd-python/build-wheel)")

    def run(name, np=2, launcher_args=(), env=None, args=()):
        # Importing TensorFlow and Keras on a loaded machine (load 17 on 2 cores) took
        # past hvdrun's default 30 s before the ranks reached hvd.init().
        command = [launcher, "--start-timeout", "120", *launcher_args, "-np", str(np),
                   sys.executable, os.path.join(JOBS, f"{name}.py"), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **(env or {})})
        return done.returncode, done.stdout + done.stderr
    return run
