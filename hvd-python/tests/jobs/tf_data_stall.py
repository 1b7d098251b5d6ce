"""hvd.tensorflow.data.instrument over a tf.data.Dataset iterated eagerly: rank 1's
batches are slow to make, and both ranks' reports charge rank 1; the four parts of each
rank add up to its wall time."""
import time

import tensorflow as tf

tf.get_logger().setLevel("ERROR")

import hvd.tensorflow as hvd

hvd.init()
rank = hvd.rank()
STEPS = 4


def load(i):
    if rank == 1:
        time.sleep(0.03)
    return i


dataset = tf.data.Dataset.range(STEPS * 2).map(
    lambda i: tf.py_function(load, [i], tf.int64)).batch(2)
batches = hvd.data.instrument(dataset)
hvd.barrier()
for batch in batches:
    hvd.allreduce(tf.cast(batch, tf.float32), name="grads")
report = batches.report
assert report["steps"] == STEPS and report["culprit"] == 1, report
for r, parts in enumerate(report["ranks"]):
    total = parts["data"] + parts["compute"] + parts["own_comm"] + parts["waiting"]
    assert abs(total - parts["wall"]) <= 0.01 * parts["wall"], (r, parts)
print(f"rank {rank}: tf.data instrumented: {report['line']}", flush=True)
