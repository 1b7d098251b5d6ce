"""hvd.init() and the threads that call into hvd while it starts a job."""

import os
import subprocess
import sys

from conftest import JOBS


def test_init_that_times_out_returns_while_another_thread_calls_in(tmp_path):
    # Rank 1 of 2 with no rank 0: init waits for the start timeout. The job's lock was
    # held while init waited without the GIL, so a thread that called in blocked on it
    # holding the GIL, and init could never take the GIL back: both hung for good.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HVD_", "HOROVOD_"))}
    env.update(HVD_RANK="1", HVD_SIZE="2", HVD_LOCAL_RANK="1", HVD_LOCAL_SIZE="2",
               HVD_STORE_DIR=str(tmp_path / "store"), HVD_START_TIMEOUT="3")
    done = subprocess.run([sys.executable, os.path.join(JOBS, "init_while_called.py")],
                          capture_output=True, text=True, timeout=120, env=env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "waiting for rank 0" in out, out
    assert "init while called ok" in out, out
