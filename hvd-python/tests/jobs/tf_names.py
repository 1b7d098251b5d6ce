"""Ranks whose tf.functions name an op differently: the stall inspector fails it on every
rank with an error naming the tensor and the rank that never submitted it (run with
HVD_STALL_CHECK_TIME and HVD_STALL_SHUTDOWN_TIME short)."""
import re

import tensorflow as tf

import hvd.tensorflow as hvd

hvd.init()
rank = hvd.rank()


@tf.function
def step(x):
    return hvd.allreduce(x, name=f"grad.rank{rank}")


try:
    step(tf.ones([2]))
    raise AssertionError("differently named ops were not refused")
except tf.errors.OpError as e:
    # How long it waited is the stall shutdown time, give or take the cycle it ended in.
    expected = re.compile(
        rf"HorovodTimeoutError: rank {rank}: allreduce of tensor 'grad.rank{rank}' timed "
        rf"out after [0-9.]+s waiting for rank\(s\) {1 - rank} to submit it \(stall "
        r"shutdown: HVD_STALL_SHUTDOWN_TIME\)")
    caught = expected.search(e.message)
    assert caught, e.message
    print(f"rank {rank}: caught: {caught.group(0)}", flush=True)
# The job goes on: each rank's op failed on its own time, and neither leaves before the
# other has caught its error.
hvd.barrier()
