"""Collectives on TensorFlow tensors, many at a time.

Every operation of ``hvd.tensorflow`` (a grouped allreduce, every gradient of a tape's
``gradient()`` call) is a batch of collectives submitted to hvd's runtime together and
then waited on, so Tensor Fusion packs them. In eager mode that happens at once; in a
graph (``tf.function``, Keras) the whole batch is one stateful ``tf.py_function`` (each
costs ~0.2 ms, so one per call, not one per tensor), and stateful py_functions run in
program order, so every rank submits its batches in the same order. Names are fixed
when the graph is traced, the same on every rank.

Tensors reach the runtime as DLPack capsules: hvd copies each into its own memory and
hands results back as capsules of 64-byte-aligned memory that TensorFlow adopts without
a copy. TensorFlow's own buffers are never written, and TensorFlow never sees memory
less aligned than it demands (it would abort the process).

A batch is differentiable with Horovod's gradients, which are a batch themselves.
"""

import re

import tensorflow as tf
from tensorflow.python.ops import control_flow_util

from hvd.common import ops as _ops
from hvd.common.basics import rank
from hvd.common.ops import Average, Sum
from hvd.tensorflow import errors, graph_steps, status_op

DTYPES = (tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16,
          tf.bfloat16, tf.float32, tf.float64, tf.bool)


class Collective:
    """One collective of a batch: ``kind`` (allreduce, broadcast, allgather, alltoall or
    reducescatter), its name on every rank, and its arguments. ``splits`` (alltoall) is
    None, a list of ints, or an integer tensor."""

    def __init__(self, kind, name, process_set, op=Sum, prescale_factor=1.0,
                 postscale_factor=1.0, root_rank=None, splits=None):
        self.kind = kind
        self.name = name
        self.process_set = process_set
        self.op = op
        self.prescale_factor = prescale_factor
        self.postscale_factor = postscale_factor
        self.root_rank = root_rank
        self.splits = splits

    def outputs(self):
        """How many tensors it gives back: alltoall also the rows received from each
        rank."""
        return 2 if self.kind == "alltoall" else 1

    def submit(self, tensor, splits):
        """Starts the collective on an eager tensor; returns the native handle."""
        described = _ops.DlpackTensor(tf.experimental.dlpack.to_dlpack(_on_host(tensor)),
                                      tensor.shape.as_list())
        if self.kind == "allreduce":
            return _ops.allreduce_async(self.name, described, self.op, self.prescale_factor,
                                        self.postscale_factor, self.process_set)
        if self.kind == "broadcast":
            return _ops.broadcast_async(self.name, described, self.root_rank,
                                        self.process_set)
        if self.kind == "allgather":
            return _ops.allgather_async(self.name, described, self.process_set)
        if self.kind == "alltoall":
            return _ops.alltoall_async(self.name, described, splits, self.process_set)
        return _ops.reducescatter_async(self.name, described, self.op, self.prescale_factor,
                                        self.postscale_factor, self.process_set)

    def finish(self, result):
        """The eager tensors of a finished collective's result."""
        if self.kind == "alltoall":
            capsule, rows = result
            return [tf.experimental.dlpack.from_dlpack(capsule),
                    tf.constant(rows, dtype=tf.int32)]
        return [tf.experimental.dlpack.from_dlpack(result)]

    def static_shapes(self, shape):
        """The shapes a graph knows of the outputs, from the input's: the first
        dimension of a gather or an alltoall depends on the other ranks."""
        if self.kind in ("allreduce", "broadcast"):
            return [shape]
        if shape.rank is None:
            return [tf.TensorShape(None)] * self.outputs()
        rest = shape[1:]
        if self.kind == "allgather":
            return [tf.TensorShape([None]).concatenate(rest)]
        if self.kind == "alltoall":
            return [tf.TensorShape([None]).concatenate(rest),
                    tf.TensorShape([self.process_set.size()])]
        return [tf.TensorShape([_scattered_rows(shape[0], self.process_set)])
                .concatenate(rest)]


def _scattered_rows(rows, process_set):
    """This rank's rows of a reducescatter of ``rows``: the first ranks of the set take
    one more when they do not divide evenly."""
    if rows is None:
        return None
    ranks, me = process_set.size(), process_set.rank()
    return rows // ranks + (1 if me < rows % ranks else 0)


def _on_host(tensor):
    """``tensor``, copied to the host first when it lives on a device."""
    if "GPU" in tensor.device:
        with tf.device("/CPU:0"):
            return tf.identity(tensor)
    return tensor


def check(tensor, what):
    """``tensor`` (a tensor, variable, array or number) as a tensor of a dtype hvd
    moves."""
    if isinstance(tensor, tf.IndexedSlices):
        raise ValueError(f"{what}: tf.IndexedSlices are reduced by allreduce (as two "
                         "allgathers); pass a dense tensor here")
    tensor = tf.convert_to_tensor(tensor)
    if tensor.dtype not in DTYPES:
        supported = ", ".join(d.name for d in DTYPES)
        raise TypeError(f"{what}: hvd does not support dtype {tensor.dtype.name}; "
                        f"supported: {supported}")
    return tensor


def default_name(kind, tensor):
    """The name of an unnamed collective: in eager mode the next number of this rank's
    sequence (so ranks must make unnamed calls in the same order, as in Horovod); in a
    graph, after the tensor's name, unique within the graph (as Horovod names its ops),
    so that a retraced graph reuses its names."""
    if tf.executing_eagerly():
        return _ops.name_for(None, kind)
    graph = tf.compat.v1.get_default_graph()
    label = re.sub("[^a-zA-Z0-9_]", "_", tensor.name)
    return graph.unique_name(f"Horovod{kind.capitalize()}_{label}", mark_as_used=True)


def refuse_xla(what):
    """A clear error, at trace time, for a collective inside XLA-compiled code, which
    cannot hold the Python call each batch is."""
    if control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        raise ValueError(
            f"hvd.tensorflow.{what} cannot run inside an XLA-compiled function: hvd's "
            "collectives are Python calls (tf.py_function), which XLA cannot compile. Use "
            "tf.function(jit_compile=False), or model.compile(..., jit_compile=False) in "
            "Keras (Keras turns XLA on by default when it sees a GPU).")


def run(collectives, tensors):
    """Runs ``collectives[i]`` on ``tensors[i]``, all as one call; returns their outputs,
    one list per collective. Differentiable with Horovod's gradients."""
    if not collectives:
        return []

    @tf.custom_gradient
    def call(*inputs):
        flat = _call(collectives, inputs)

        def grad(*grads):
            return _backward(collectives, inputs, flat, grads)
        return flat, grad

    flat = list(call(*tensors))
    out, at = [], 0
    for c in collectives:
        out.append(flat[at:at + c.outputs()])
        at += c.outputs()
    return out


def _execute(collectives, tensors, splits):
    """Submits every collective, then waits for each: eager tensors in and out."""
    try:
        handles = [c.submit(t, s) for c, t, s in zip(collectives, tensors, splits)]
        flat = []
        for c, h in zip(collectives, handles):
            flat.extend(c.finish(h.wait()))
        return flat
    except Exception as e:
        converted = errors.as_tensorflow(e)
        if converted is e:
            raise
        raise converted from None


def _split_list(splits):
    if splits is None:
        return None
    if isinstance(splits, (tf.Tensor, tf.Variable)):
        return [int(s) for s in splits.numpy().tolist()]
    return [int(s) for s in splits]


def _call(collectives, tensors):
    if tf.executing_eagerly():
        return _execute(collectives, tensors, [_split_list(c.splits) for c in collectives])
    refuse_xla(collectives[0].kind)
    graph = tf.compat.v1.get_default_graph()
    # Split tensors of a graph are inputs of the call too, read when it runs.
    dynamic = [i for i, c in enumerate(collectives) if isinstance(c.splits, tf.Tensor)]
    fixed = [_split_list(None if i in dynamic else c.splits)
             for i, c in enumerate(collectives)]
    extra = [collectives[i].splits for i in dynamic]
    # A TensorFlow 1 graph run goes on after an error: its collectives need its token.
    run_token = None if graph.building_function else graph_steps.token(graph)
    graph_id = id(graph)
    # There, an error's class comes back as data, raised by hvd's status op.
    status = None if run_token is None else status_op.module()

    dtypes = []
    for c, t in zip(collectives, tensors):
        dtypes.extend([t.dtype, tf.int32][:c.outputs()])

    def execute(*inputs):
        splits = list(fixed)
        for i, s in zip(dynamic, inputs[len(tensors):len(tensors) + len(dynamic)]):
            splits[i] = _split_list(s)
        if run_token is None:
            return _execute(collectives, inputs[:len(tensors)], splits)
        run = float(inputs[-1].numpy())
        try:
            graph_steps.check(graph_id, run, _what(collectives))
            flat = _execute(collectives, inputs[:len(tensors)], splits)
        except Exception as e:
            graph_steps.failed(graph_id, run, e)
            code = _error_code(e)
            if status is None or code is None:
                raise
            return [tf.zeros([0], d) for d in dtypes] + [tf.constant(code, tf.int32),
                                                         tf.constant(str(e))]
        if status is None:
            return flat
        return flat + [tf.constant(0, tf.int32), tf.constant("")]

    extra_dtypes = [] if status is None else [tf.int32, tf.string]
    flat = tf.py_function(execute, list(tensors) + extra + ([run_token] if run_token is not None
                                                             else []),
                          dtypes + extra_dtypes, name="HorovodBatch")
    if status is not None:
        code, message = flat[-2:]
        with tf.control_dependencies([status.hvd_raise_status(code, message)]):
            flat = [tf.identity(t) for t in flat[:-2]]
    at = 0
    for c, t in zip(collectives, tensors):
        for shape in c.static_shapes(t.shape):
            flat[at].set_shape(shape)
            at += 1
    return flat


def _error_code(error):
    """The TensorFlow error code ``error`` stands for (that of the collective that failed
    first, for one not started because of it), or None for any other error."""
    if isinstance(error, (tf.errors.OpError, graph_steps.EarlierCollectiveFailed)):
        return error.error_code
    return None


def _what(collectives):
    """The collectives of a batch, for an error: "allgather of tensor 'x'" (and how
    many more)."""
    first = f"{collectives[0].kind} of tensor '{collectives[0].name}'"
    more = len(collectives) - 1
    return first if not more else f"{first} (and {more} more of the same call)"


def _backward(collectives, inputs, flat, grads):
    """Horovod's gradients of a batch, as one batch: allreduce the allreduced; average
    onto the root what was broadcast; average, then take this rank's rows of, what was
    gathered; send back the way it came what went through an alltoall; gather what was
    reduced and scattered."""
    backward, tensors, finish = [], [], []
    at = 0
    for c, x in zip(collectives, inputs):
        out, dy = flat[at], grads[at]
        at += c.outputs()
        if not x.dtype.is_floating:
            finish.append(lambda _: None)
            continue
        if dy is None:
            dy = tf.zeros_like(out)
        name, ps = _grad_name(c.name), c.process_set
        first = len(backward)
        if c.kind == "allreduce":
            backward.append(Collective("allreduce", name, ps, c.op, c.prescale_factor,
                                       c.postscale_factor))
            tensors.append(dy)
            finish.append(lambda r, i=first: r[i][0])
        elif c.kind == "broadcast":
            backward.append(Collective("allreduce", name, ps, Average))
            tensors.append(dy)
            # The same ops on every rank (a factor of 1 or 0), so that the graph, and
            # the names derived from it, stay the same on every rank.
            keep = float(rank() == int(c.root_rank))
            finish.append(lambda r, i=first, keep=keep: r[i][0] * tf.cast(keep, r[i][0].dtype))
        elif c.kind == "allgather":
            rows = tf.reshape(tf.cast(tf.shape(x)[0], tf.int64), [1])
            backward += [Collective("allreduce", name, ps, Average),
                         Collective("allgather", f"{name}.rows", ps)]
            tensors += [dy, rows]
            finish.append(lambda r, i=first, ps=ps: _my_rows(r[i][0], r[i + 1][0], ps))
        elif c.kind == "alltoall":
            backward.append(Collective("alltoall", name, ps, splits=flat[at - 1]))
            tensors.append(dy)
            finish.append(lambda r, i=first: r[i][0])
        else:
            backward.append(Collective("allgather", name, ps))
            tensors.append(dy * _scatter_grad_factor(c))
            finish.append(lambda r, i=first: r[i][0])
    results = run(backward, tensors)
    return [f(results) for f in finish]


def _grad_name(name):
    """The name of a collective's gradient: in a graph, unique within it (each
    ``tf.gradients`` call through a grouped collective builds a gradient of the whole
    group, and one graph run may run them all), the same on every rank."""
    if tf.executing_eagerly():
        return f"{name}.grad"
    return tf.compat.v1.get_default_graph().unique_name(f"{name}.grad", mark_as_used=True)


def _my_rows(gathered, counts, process_set):
    """This rank's rows of a tensor gathered from ``counts[r]`` rows of each rank."""
    me = process_set.rank()
    start = tf.reduce_sum(counts[:me])
    return gathered[start:start + counts[me]]


def _scatter_grad_factor(c):
    """Horovod's scale of a reducescatter's gradient before the allgather: the set's size
    for Sum, and the scale factors."""
    factor = float(c.process_set.size()) if c.op is Sum else 1.0
    return factor * c.prescale_factor * c.postscale_factor
