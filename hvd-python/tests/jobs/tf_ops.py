"""hvd.tensorflow's collectives in eager mode and inside tf.function, across dtypes and
empty tensors, checked against values computed locally; their gradients against
analytic values; and what must not go wrong: TensorFlow's own buffers left unwritten,
results 64-byte aligned, XLA refused with what to set, calls in program order."""
import ctypes
import time

import numpy as np
import tensorflow as tf

tf.get_logger().setLevel("ERROR")

import hvd.tensorflow as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
assert size == 2, "this job checks values for 2 ranks"


def say(what):
    print(f"rank {rank}: {what}", flush=True)


def value(r, dtype, rows=3):
    """What rank r contributes: small numbers every dtype holds exactly."""
    base = (np.arange(rows * 4).reshape(rows, 4) % 5 + r + 1).astype(np.float64)
    if dtype == tf.bool:
        return tf.constant(base % 2 == 1)
    return tf.cast(tf.constant(base), dtype)


def same(got, want):
    want = tf.convert_to_tensor(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(np.asarray(tf.cast(got, tf.float64) if got.dtype != tf.bool
                                     else got),
                          np.asarray(tf.cast(want, tf.float64) if want.dtype != tf.bool
                                     else want)), (got, want)


def everyone(dtype, rows=3):
    return tf.stack([tf.cast(value(r, dtype, rows), tf.float64) for r in range(size)])


FLOATS = [tf.float32, tf.float64, tf.float16, tf.bfloat16]
INTS = [tf.int32, tf.int64]


def ops_of(dtype):
    """Every op on this dtype, with the values it must give: (name, function of the
    input, expected)."""
    mine, all_ = value(rank, dtype), everyone(dtype)
    cases = []
    if dtype != tf.bool:
        cases += [
            ("sum", lambda x: hvd.allreduce(x, op=hvd.Sum, name="sum"),
             tf.cast(tf.reduce_sum(all_, 0), dtype)),
            ("max", lambda x: hvd.allreduce(x, op=hvd.Max, name="max"),
             tf.cast(tf.reduce_max(all_, 0), dtype)),
            ("min", lambda x: hvd.allreduce(x, op=hvd.Min, name="min"),
             tf.cast(tf.reduce_min(all_, 0), dtype)),
            ("product", lambda x: hvd.allreduce(x, op=hvd.Product, name="prod"),
             tf.cast(tf.reduce_prod(all_, 0), dtype)),
            ("scaled", lambda x: hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0,
                                               postscale_factor=0.5, name="scaled"),
             tf.cast(tf.reduce_sum(all_, 0), dtype)),
            ("reducescatter", lambda x: hvd.reducescatter(tf.concat([x, x], 0), op=hvd.Sum,
                                                          name="rs"),
             tf.cast(tf.reduce_sum(all_, 0), dtype)),
            ("grouped", lambda x: hvd.grouped_allreduce([x, x + x], op=hvd.Sum,
                                                        name="group")[1],
             tf.cast(2 * tf.reduce_sum(all_, 0), dtype)),
        ]
    if dtype.is_floating:
        cases += [("average", lambda x: hvd.allreduce(x, name="avg"),
                   tf.cast(tf.reduce_mean(all_, 0), dtype))]
    ragged = value(rank, dtype, rank + 1)
    cases += [
        ("broadcast", lambda x: hvd.broadcast(x, 1, name="bcast"), value(1, dtype)),
        ("allgather", lambda x: hvd.allgather(ragged if tf.executing_eagerly()
                                              else tf.identity(ragged), name="gather"),
         tf.concat([value(r, dtype, r + 1) for r in range(size)], 0)),
        ("alltoall", lambda x: hvd.alltoall(x[:2], name="a2a"),
         tf.concat([value(r, dtype)[rank:rank + 1] for r in range(size)], 0)),
    ]
    return mine, cases


# Every op on every dtype, eager and traced; the graph keeps the static shapes it can.
for dtype in FLOATS + INTS + [tf.bool]:
    mine, cases = ops_of(dtype)
    for label, fn, want in cases:
        same(fn(mine), want)
        traced = tf.function(fn)
        graph = traced.get_concrete_function(tf.TensorSpec(mine.shape, dtype))
        static = graph.structured_outputs.shape
        if label in ("allgather", "alltoall"):
            assert static.as_list() == [None, 4], (label, static)
        else:
            assert static == want.shape, (label, static, want.shape)
        same(traced(mine), want)
say("every op and dtype matches, eager and in tf.function")

# The grouped forms: one call, one result per tensor, traced too.
pair = [tf.fill([rank + 1, 2], float(rank)), tf.fill([rank + 1], rank + 10)]
for grouped in (hvd.grouped_allgather, tf.function(hvd.grouped_allgather)):
    gathered = grouped(pair, name="ggather")
    same(gathered[0], tf.constant([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]))
    same(gathered[1], tf.constant([10, 11, 11]))
rows = [tf.reshape(tf.range(8.0), [4, 2]), tf.reshape(tf.range(6.0), [3, 2])]
for grouped in (hvd.grouped_reducescatter, tf.function(hvd.grouped_reducescatter)):
    scattered = grouped(rows, op=hvd.Sum, name="gscatter")
    same(scattered[0], 2 * rows[0][2 * rank:2 * rank + 2])
    same(scattered[1], 2 * rows[1][[0, 2][rank]:[2, 3][rank]])
say("grouped allgather and reducescatter ok")

# Empty tensors go through every op.
empty = tf.zeros([0, 4], tf.float32)
same(hvd.allreduce(empty, name="empty.sum"), empty)
same(hvd.allgather(empty, name="empty.gather"), empty)
same(hvd.broadcast(empty, 0, name="empty.bcast"), empty)
same(tf.function(lambda x: hvd.allreduce(x, name="empty.graph"))(empty), empty)
say("empty tensors ok")

# alltoall with splits returns the rows received from each rank; a split tensor of a
# graph is read when the graph runs.
sent = tf.range(3 * (rank + 1), dtype=tf.float32)
splits = [1, 2] if rank == 0 else [2, 4]
want_rows = [[1, 2], [2, 4]][rank]
for run in (lambda: hvd.alltoall(sent, splits=splits, name="a2a.splits"),
            tf.function(lambda: hvd.alltoall(sent, splits=tf.constant(splits),
                                              name="a2a.splits"))):
    got, rows = run()
    assert rows.dtype == tf.int32 and rows.numpy().tolist() == want_rows, rows
    assert got.numpy().tolist() == [[0.0, 0.0, 1.0], [1.0, 2.0, 2.0, 3.0, 4.0, 5.0]][rank], got
say("alltoall splits ok")

# Compression narrows the wire: 1 + 2^-10 is not a bf16 and arrives as 1.
fine = tf.fill([5], 1.0 + 2.0 ** -10)
same(hvd.allreduce(fine, compression=hvd.Compression.bf16, name="bf16"), tf.ones([5]))
same(hvd.allreduce(fine, compression=hvd.Compression.fp16, name="fp16"), fine)

# Process sets: a set of rank 1 alone.
alone = hvd.add_process_set([1])
if rank == 1:
    same(hvd.allreduce(tf.ones([2]), op=hvd.Sum, process_set=alone, name="ps"),
         tf.ones([2]))
hvd.barrier()
hvd.remove_process_set(alone)
say("compression and process sets ok")

# IndexedSlices: gathered, averaged, as Horovod does.
slices = tf.IndexedSlices(tf.fill([1, 2], float(rank + 1)), tf.constant([rank]),
                          tf.constant([2, 2]))
reduced = hvd.allreduce(slices, name="slices")
assert isinstance(reduced, tf.IndexedSlices)
same(tf.convert_to_tensor(reduced), tf.constant([[0.5, 0.5], [1.0, 1.0]]))
say("IndexedSlices ok")

# Gradients, Horovod's, against analytic values: each rank weighs the output by rank+1
# (weights w with mean 1.5 and sum 3 over the 2 ranks).
w = float(rank + 1)


def grad_of(fn, x):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        position = tf.cast(tf.range(1, tf.size(y) + 1), y.dtype)
        loss = tf.reduce_sum(y * w * tf.reshape(position, tf.shape(y)))
    return tape.gradient(loss, x)


def both(fn, x):
    """The gradient in eager mode, and inside tf.function: they must agree."""
    eager = grad_of(fn, x)
    graph = tf.function(lambda: grad_of(fn, x))()
    np.testing.assert_allclose(eager.numpy(), graph.numpy())
    return eager.numpy()


ones = np.ones([2, 2], np.float32)
position = np.arange(1.0, 5.0, dtype=np.float32).reshape(2, 2)
# allreduce: the same allreduce of the output's gradient.
np.testing.assert_allclose(both(lambda x: hvd.allreduce(x, name="g.avg"), ones),
                           1.5 * position)
np.testing.assert_allclose(both(lambda x: hvd.allreduce(x, op=hvd.Sum, name="g.sum"), ones),
                           3.0 * position)
# broadcast: averaged onto the root, zero elsewhere.
np.testing.assert_allclose(both(lambda x: hvd.broadcast(x, 0, name="g.bcast"), ones),
                           1.5 * position if rank == 0 else 0 * position)
# allgather: averaged, then this rank's rows (rank 0 has 1 row, rank 1 has 2).
gathered_grad = both(lambda x: hvd.allgather(x, name="g.gather"),
                     np.ones([rank + 1, 2], np.float32))
np.testing.assert_allclose(gathered_grad, 1.5 * np.arange(1.0, 7.0).reshape(3, 2)[
    [[0], [1, 2]][rank]])
# alltoall: sent back the way it came; row r went to rank r, weighed there by r+1.
np.testing.assert_allclose(both(lambda x: hvd.alltoall(x, name="g.a2a"), ones),
                           [[1.0 + 2 * rank, 2.0 + 2 * rank], [2.0 + 4 * rank, 4.0 + 4 * rank]])
# reducescatter: the gradient gathered (times the set's size for Sum).
np.testing.assert_allclose(
    both(lambda x: hvd.reducescatter(x, op=hvd.Sum, name="g.rs"), ones),
    2.0 * np.array([[1.0, 2.0], [2.0, 4.0]]))
np.testing.assert_allclose(
    both(lambda x: hvd.reducescatter(x, op=hvd.Average, name="g.rs.avg"), ones),
    [[1.0, 2.0], [2.0, 4.0]])
say("gradients match the analytic values")

# broadcast_variables, broadcast_object, allgather_object, join.
variable = tf.Variable(tf.fill([3], float(rank)))
hvd.broadcast_variables([variable], root_rank=1)
same(variable, tf.fill([3], 1.0))
inside = tf.Variable(tf.fill([2], float(rank) + 5))
tf.function(lambda: hvd.broadcast_variables([inside], root_rank=0))()
same(inside, tf.fill([2], 5.0))
assert hvd.broadcast_object({"from": rank}, root_rank=1) == {"from": 1}
assert hvd.allgather_object(("r", rank)) == [("r", 0), ("r", 1)]
assert int(hvd.join()) in (0, 1)
assert int(tf.function(hvd.join)()) in (0, 1)
tf.function(hvd.barrier)()
say("variables, objects, join and barrier ok")

# TensorFlow's buffer is never written: a constant's memory is shared, an op writing
# into it would change the constant itself.
kept = tf.constant([1.0, 2.0, 3.0])
before = kept.numpy().copy()
hvd.allreduce(kept, op=hvd.Sum, name="untouched")
assert np.array_equal(kept.numpy(), before), kept
# Every result is 64-byte aligned, whatever its size: TensorFlow aborts the process on
# less (this job would die here), and numpy's own memory is only 16-byte aligned.


def address(tensor):
    """Where a tensor's memory starts: the data pointer of its DLPack tensor."""
    capsule = tf.experimental.dlpack.to_dlpack(tensor)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.c_void_p.from_address(get(capsule, b"dltensor")).value or 0


for n in (1, 3, 5, 17, 100):
    out = hvd.allgather(tf.cast(tf.range(n), tf.int8), name=f"aligned.{n}")
    assert address(out) % 64 == 0, (n, address(out))
    assert tf.reduce_sum(tf.cast(out, tf.int32)).numpy() == n * (n - 1)
from_numpy = np.arange(1.0, 8.0, dtype=np.float32)[1:]
same(hvd.allreduce(from_numpy, op=hvd.Sum, name="misaligned.input"), 2 * from_numpy)
say("TensorFlow's buffers untouched and results aligned")

# XLA cannot hold a Python call: a clear error at trace time, naming what to set.
try:
    tf.function(lambda x: hvd.allreduce(x, name="xla"), jit_compile=True)(tf.ones([2]))
    raise AssertionError("jit_compile=True was not refused")
except ValueError as e:
    assert "hvd.tensorflow.allreduce cannot run inside an XLA-compiled function" in str(e), e
    assert "tf.function(jit_compile=False)" in str(e), e
say("XLA refused")

# Ordering under stress: ranks reach the ops at different times (rank-dependent sleeps
# inside the graph), and every rank still runs them in program order, so the named
# ops pair up whatever the timing.


def nap(seconds):
    def sleep():
        time.sleep(seconds)
        return tf.constant(0.0)
    return tf.py_function(sleep, [], tf.float32)


@tf.function
def ordered(x):
    outs = []
    for i in range(8):
        pause = nap(0.002 * ((i + rank) % 3))
        outs.append(hvd.allreduce(x * float(i) + pause, op=hvd.Sum, name=f"order.{i}"))
    return tf.stack(outs)


for _ in range(5):
    got = ordered(tf.fill([4], float(rank + 1)))
    np.testing.assert_allclose(got.numpy(), np.outer(3.0 * np.arange(8), np.ones(4)))
say("ordering under stress ok")

# Ranks that disagree on a shape: the same error, naming both, on every rank (eager) and
# inside a graph.
message = "Mismatched shapes for tensor 'mismatch.shape': rank 0 has [2], rank 1 has [3]"
try:
    hvd.allreduce(tf.ones([rank + 2]), name="mismatch.shape")
    raise AssertionError("mismatched shapes were not refused")
except hvd.MismatchError as e:
    assert str(e) == message, e
try:
    tf.function(lambda: hvd.allreduce(tf.ones([rank + 2]), name="mismatch.shape"))()
    raise AssertionError("mismatched shapes were not refused in a graph")
except tf.errors.OpError as e:
    assert f"MismatchError: {message}" in e.message, e.message
say("mismatches named")
say("tf ops ok")
