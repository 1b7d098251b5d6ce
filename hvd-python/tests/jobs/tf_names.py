"""Ranks whose tf.functions name an op differently: the stall inspector fails it on every
rank with an error naming the tensor and the rank that never submitted it (run with
HVD_STALL_CHECK_TIME and HVD_STALL_SHUTDOWN_TIME short)."""
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
    other = 1 - rank
    expected = (f"HorovodTimeoutError: rank {rank}: allreduce of tensor 'grad.rank{rank}' "
                f"timed out after 2s waiting for rank(s) {other} to submit it (stall "
                "shutdown: HVD_STALL_SHUTDOWN_TIME)")
    assert expected in e.message, e.message
    print(f"rank {rank}: caught: {expected}", flush=True)
# The job goes on: each rank's op failed on its own time, and neither leaves before the
# other has caught its error.
hvd.barrier()
