"""What the Ray tests share: Ray itself (a skip naming the install command when it is
missing, a failure under CI, which installs it), a Ray instance for one test module, and
the check that no worker outlives its job."""

import os
import sys
import time

import pytest

INSTALL = "pip install 'ray[train]==2.60.0'"


def need_ray():
    """The ray module; skips the module without it (fails under CI)."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"Ray is not installed ({INSTALL})")
        pytest.skip(f"Ray is not installed ({INSTALL})", allow_module_level=True)
    return ray


def no_token_auth():
    """Ray 2.60 turns token auth on; the tests' short-lived clusters have no tokens."""
    os.environ["RAY_AUTH_MODE"] = "disabled"


def ray_options():
    """ray.init's options for a test's own Ray: no dashboard, on loopback, no tokens."""
    no_token_auth()
    return {"_node_ip_address": "127.0.0.1", "include_dashboard": False}


def send_by_value(module_name):
    """Ray's workers cannot import the test modules: their functions travel by value."""
    import ray.cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[module_name])


def wait_gone(pids, timeout_s=60):
    """The processes of ``pids`` still alive after up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent (Ray's raylet) has yet to reap it.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
