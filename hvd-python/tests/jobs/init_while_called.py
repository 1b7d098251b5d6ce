"""hvd.init() on a rank whose peer never comes, while another thread keeps calling into
hvd: init must fail after the start timeout and return, and the other thread's calls
must go on meanwhile. Run as rank 1 of 2 with no rank 0, HVD_START_TIMEOUT=3."""
import threading
import time

import hvd.common.basics as hvd

calls = 0
stop = threading.Event()


def call_in():
    global calls
    while not stop.is_set():
        hvd.is_initialized()
        calls += 1


threading.Thread(target=call_in, daemon=True).start()
started = time.monotonic()
try:
    hvd.init()
    raise AssertionError("init of a rank without its peer returned")
except RuntimeError as e:
    print(f"init failed after {time.monotonic() - started:.1f}s: {e}", flush=True)
stop.set()
assert calls > 0, "the other thread never ran while init waited"
print(f"other thread called in {calls} times: init while called ok", flush=True)
