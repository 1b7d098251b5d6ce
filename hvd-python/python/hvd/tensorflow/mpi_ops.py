"""Tensor collectives, as horovod.tensorflow's: on tensors, variables and IndexedSlices,
in eager mode and inside ``tf.function``, each differentiable with Horovod's gradient
(see ``hvd.tensorflow.batch``). The forms that take several tensors run them as one
call. ``device_dense``, ``device_sparse`` and ``ignore_name_scope`` are accepted for
Horovod's signatures: hvd works on host memory and its names ignore name scopes."""

import tensorflow as tf

from hvd.common import ops as _ops
from hvd.common.basics import cross_rank, cross_size, local_rank, local_size, rank
from hvd.common.ops import Adasum, Average, Sum, resolve_op
from hvd.common.process_sets import global_process_set, members
from hvd.tensorflow.batch import Collective, check, default_name, refuse_xla, run
from hvd.tensorflow.compression import Compression


def _names(name, tensors, kind):
    """One name per tensor of a call: ``name.i`` (or the default name's) for a group."""
    base = name if name is not None else default_name(kind, tensors[0])
    return [f"{base}.{i}" for i in range(len(tensors))]


def _average(values, process_set):
    return values / tf.cast(process_set.size(), values.dtype)


def _check_sparse(tensors, op, prescale_factor, postscale_factor):
    """Horovod's refusals for tf.IndexedSlices, which are reduced by allgathers: only Sum
    and Average, and no scale factors."""
    if not any(isinstance(t, tf.IndexedSlices) for t in tensors):
        return
    if op is Adasum:
        raise NotImplementedError(
            "Adasum does not support sparse tensors (tf.IndexedSlices); pass "
            "sparse_as_dense=True, or convert them with tf.convert_to_tensor")
    if op not in (Average, Sum):
        raise NotImplementedError("Only Sum and Average ops are supported with "
                                  "tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscaling is not supported with tf.IndexedSlices")


def reduce_many(tensors, names, op, prescale_factor, postscale_factor, compression,
                process_set):
    """Allreduces every tensor of the list as one call: dense tensors (narrowed by
    ``compression`` on the wire) by allreduce, IndexedSlices as Horovod does, by
    allgathers of their values and indices (Average divides the values by the set's
    size, and both scale factors apply to the values). Returns the results in order."""
    collectives, inputs, finish = [], [], []
    for tensor, name in zip(tensors, names):
        at = len(collectives)
        if isinstance(tensor, tf.IndexedSlices):
            values = check(tensor.values, "allreduce")
            if prescale_factor * postscale_factor != 1.0:
                # Gradients' predivide factor: gathering is exact, so both factors apply
                # to the values alike (the public allreduce refuses factors, as Horovod).
                values = values * tf.cast(prescale_factor * postscale_factor, values.dtype)
            collectives += [Collective("allgather", f"{name}.values", process_set),
                            Collective("allgather", f"{name}.indices", process_set)]
            inputs += [values, check(tensor.indices, "allreduce")]
            finish.append(lambda r, i=at, t=tensor: tf.IndexedSlices(
                _average(r[i][0], process_set) if op is Average else r[i][0], r[i + 1][0],
                dense_shape=t.dense_shape))
        else:
            wire, ctx = compression.compress(check(tensor, "allreduce"))
            collectives.append(Collective("allreduce", name, process_set, op,
                                          prescale_factor, postscale_factor))
            inputs.append(wire)
            finish.append(lambda r, i=at, ctx=ctx: compression.decompress(r[i][0], ctx))
    results = run(collectives, inputs)
    return [f(results) for f in finish]


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """The reduction of ``tensor`` over the ranks of the set (their average by default;
    ``op=hvd.Sum``, ``Min``, ``Max``, ``Product`` or ``Adasum``), scaled by the factors
    before and after, as a new tensor. A ``tf.IndexedSlices`` is reduced as Horovod
    does, by allgathers of its values and indices."""
    op = resolve_op(op, average)
    _check_sparse([tensor], op, prescale_factor, postscale_factor)
    value = tensor if isinstance(tensor, tf.IndexedSlices) else check(tensor, "allreduce")
    if name is None:
        name = default_name("allreduce", value.values if isinstance(value, tf.IndexedSlices)
                            else value)
    return reduce_many([value], [name], op, prescale_factor, postscale_factor, compression,
                       process_set)[0]


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """Allreduces every tensor of the list, as one call (so Tensor Fusion packs them)."""
    if not tensors:
        return []
    op = resolve_op(op, average)
    _check_sparse(tensors, op, prescale_factor, postscale_factor)
    values = [t if isinstance(t, tf.IndexedSlices) else check(t, "grouped_allreduce")
              for t in tensors]
    firsts = [v.values if isinstance(v, tf.IndexedSlices) else v for v in values]
    return reduce_many(values, _names(name, firsts, "grouped_allreduce"), op,
                       prescale_factor, postscale_factor, compression, process_set)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """The ranks' tensors concatenated along the first dimension (which may differ
    between ranks), as a new tensor."""
    tensor = check(tensor, "allgather")
    name = name if name is not None else default_name("allgather", tensor)
    return run([Collective("allgather", name, process_set)], [tensor])[0][0]


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """Allgathers every tensor of the list, as one call."""
    if not tensors:
        return []
    tensors = [check(t, "grouped_allgather") for t in tensors]
    names = _names(name, tensors, "grouped_allgather")
    return [out[0] for out in run([Collective("allgather", n, process_set) for n in names],
                                  tensors)]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """``root_rank``'s tensor (a global rank, a member of the set) on every rank, as a new
    tensor."""
    tensor = check(tensor, "broadcast")
    name = name if name is not None else default_name("broadcast", tensor)
    return run([Collective("broadcast", name, process_set, root_rank=root_rank)],
               [tensor])[0][0]


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Overwrites every variable of the list with ``root_rank``'s value, as one call;
    returns the variables (in a TensorFlow 1 graph, the assignments to run)."""
    variables = list(variables)
    if not variables:
        return variables
    values = [check(v, "broadcast_") for v in variables]
    names = _names(name, values, "broadcast")
    results = run([Collective("broadcast", n, process_set, root_rank=root_rank)
                   for n in names], values)
    if not tf.executing_eagerly() and not tf.compat.v1.get_default_graph().building_function:
        # A TensorFlow 1 graph assigns when the caller runs it: return each assignment,
        # whose value is the variable's new value, as Horovod's op does.
        return [variable.assign(out[0]) for variable, out in zip(variables, results)]
    for variable, out in zip(variables, results):
        variable.assign(out[0])
    return variables


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends ``splits[r]`` rows of the first dimension to the set's rank ``r`` (even
    splits by default; a list or an integer tensor); returns the rows every rank sent
    here, and with ``splits`` given, as Horovod does, also how many came from each rank
    (an int32 tensor)."""
    tensor = check(tensor, "alltoall")
    if tensor.shape.rank == 0:
        raise ValueError("alltoall: the tensor needs at least one dimension")
    if isinstance(splits, (tf.Tensor, tf.Variable)) and not splits.dtype.is_integer:
        raise ValueError(f"alltoall: splits must hold integers (an int32 tensor or a "
                         f"list), not {splits.dtype.name}")
    if isinstance(splits, tf.Variable):
        splits = tf.convert_to_tensor(splits)
    name = name if name is not None else default_name("alltoall", tensor)
    received, rows = run([Collective("alltoall", name, process_set, splits=splits)],
                         [tensor])[0]
    return received if splits is None else (received, rows)


def _reducescatter_op(op):
    op = resolve_op(op)
    if op is Adasum:
        raise NotImplementedError("reducescatter does not support Adasum: Adasum combines "
                                  "whole tensors (allreduce, DistributedGradientTape); use "
                                  "Sum or Average")
    return op


def _scatter_all(tensors, names, op, compression, process_set, prescale_factor,
                 postscale_factor):
    collectives, inputs, ctxs = [], [], []
    for tensor, name in zip(tensors, names):
        if tensor.shape.rank == 0:
            raise ValueError("reducescatter: the tensor needs at least one dimension")
        wire, ctx = compression.compress(tensor)
        collectives.append(Collective("reducescatter", name, process_set, op,
                                      prescale_factor, postscale_factor))
        inputs.append(wire)
        ctxs.append(ctx)
    results = run(collectives, inputs)
    return [compression.decompress(out[0], ctx) for out, ctx in zip(results, ctxs)]


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average,
                  name=None, process_set=global_process_set, ignore_name_scope=False,
                  prescale_factor=1.0, postscale_factor=1.0):
    """This rank's rows of the reduction over the ranks (the first ranks take one more
    row when they do not divide evenly), as a new tensor."""
    op = _reducescatter_op(op)
    tensor = check(tensor, "reducescatter")
    name = name if name is not None else default_name("reducescatter", tensor)
    return _scatter_all([tensor], [name], op, compression, process_set, prescale_factor,
                        postscale_factor)[0]


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none,
                          op=Average, process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0, name=None):
    """Reducescatters every tensor of the list, as one call."""
    if not tensors:
        return []
    op = _reducescatter_op(op)
    tensors = [check(t, "grouped_reducescatter") for t in tensors]
    return _scatter_all(tensors, _names(name, tensors, "grouped_reducescatter"), op,
                        compression, process_set, prescale_factor, postscale_factor)


def _run_now_or_in_graph(fn, what):
    """``fn()`` (an int) as an int32 tensor: now in eager mode, else as a stateful call
    of the graph, when it runs."""
    if tf.executing_eagerly():
        return tf.constant(fn(), dtype=tf.int32)
    refuse_xla(what)
    out = tf.py_function(lambda: tf.constant(fn(), dtype=tf.int32), [], tf.int32,
                         name=f"Horovod{what.capitalize()}")
    out.set_shape([])
    return out


def join(process_set=global_process_set):
    """This rank has no more data: until every rank has joined, it contributes zeros to
    the others' allreduces. Returns the last rank to join (an int32 tensor)."""
    return _run_now_or_in_graph(lambda: _ops.join(process_set), "join")


def barrier(process_set=global_process_set):
    """Returns once every member of the set has reached the barrier; in a graph, the
    barrier is an op (returning 0) that waits when it runs."""
    if tf.executing_eagerly():
        _ops.barrier(process_set)
        return None

    def wait():
        _ops.barrier(process_set)
        return 0
    return _run_now_or_in_graph(wait, "barrier")


# The job's numbers as int32 tensors, as Horovod's ``*_op`` functions give them; fixed
# for the job, so a graph holds them as constants.

def size_op(process_set_id=0, name=None):
    return tf.constant(len(members(process_set_id)), dtype=tf.int32, name=name)


def rank_op(name=None):
    return tf.constant(rank(), dtype=tf.int32, name=name)


def local_size_op(name=None):
    return tf.constant(local_size(), dtype=tf.int32, name=name)


def local_rank_op(name=None):
    return tf.constant(local_rank(), dtype=tf.int32, name=name)


def cross_size_op(name=None):
    return tf.constant(cross_size(), dtype=tf.int32, name=name)


def cross_rank_op(name=None):
    return tf.constant(cross_rank(), dtype=tf.int32, name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank belongs to the set, 0 when not (an int32 tensor)."""
    return tf.constant(int(rank() in members(process_set_id)), dtype=tf.int32, name=name)
