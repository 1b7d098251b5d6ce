"""TensorFlow 1 graphs (a session's run) with many collectives: they complete when the
ranks run them in different orders, and when they cannot (one inter-op thread, each
rank starting with a collective the other rank runs last), every rank's run ends after
the stall shutdown with an error naming the tensor and the missing rank, instead of
waiting once per collective. Run with HVD_STALL_CHECK_TIME=1, HVD_STALL_SHUTDOWN_TIME=2."""
import re
import time

import numpy as np
import tensorflow as tf

import hvd.tensorflow as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
SHUTDOWN = 2.0
COLLECTIVES = 48

# Many collectives in one run: each holds one of TensorFlow's inter-op threads while it
# waits, and each rank's threads take them in their own order.
graph = tf.Graph()
with graph.as_default():
    gathered = [hvd.allgather(tf.fill([2, 3], float(rank * 100 + i))) for i in range(COLLECTIVES)]
    with tf.compat.v1.Session(graph=graph) as session:
        for _ in range(2):
            for i, value in enumerate(session.run(gathered)):
                expected = np.concatenate([np.full([2, 3], r * 100.0 + i) for r in range(size)])
                assert np.array_equal(value, expected), (i, value)
print(f"rank {rank}: {COLLECTIVES} collectives of one graph run ok", flush=True)

# One inter-op thread, and each rank's first collective is the other rank's last: no
# rank can start what the other waits for. Names are given, so they match.
graph = tf.Graph()
with graph.as_default():
    order = range(COLLECTIVES) if rank == 0 else reversed(range(COLLECTIVES))
    ops = [hvd.allgather(tf.fill([2], float(i)), name=f"starved.{i}") for i in order]
    config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=1,
                                      use_per_session_threads=True)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        started = time.monotonic()
        try:
            session.run(ops)
            raise AssertionError("a starved graph run did not fail")
        except tf.errors.OpError as e:
            took = time.monotonic() - started
            caught = re.search(
                rf"rank {rank}: allgather of tensor 'starved\.[0-9]+' timed out after "
                rf"[0-9.]+s waiting for rank\(s\) {1 - rank} to submit it \(stall shutdown: "
                r"HVD_STALL_SHUTDOWN_TIME\)", e.message)
            assert caught, e.message
            # One stall shutdown (and a few negotiation cycles), not one per collective.
            assert took < 3 * SHUTDOWN + 2, f"the run took {took:.1f}s"
            print(f"rank {rank}: starved run failed: {caught.group(0)}", flush=True)
hvd.barrier()
print(f"rank {rank}: graph stall ok", flush=True)
