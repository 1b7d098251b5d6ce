"""Helpers Horovod's TensorFlow users import from ``horovod.tensorflow.util``: whether
code runs eagerly, a function compiled once per argument list, and variables as hashable
references."""

import functools

import tensorflow as tf


def _executing_eagerly():
    """Whether TensorFlow runs eagerly here (False while a graph or tf.function is being
    built)."""
    return tf.executing_eagerly()


def _make_subgraph(f):
    """``f`` as a tf.function (one graph per signature); TensorFlow 2 builds it lazily."""
    return tf.function(f)


def _cache(f):
    """``f`` computed once per distinct tuple of arguments (in eager mode, where the
    result is a graph function worth keeping); called through otherwise."""
    cached = {}

    @functools.wraps(f)
    def wrapper(*args):
        if not _executing_eagerly():
            return f(*args)
        if args not in cached:
            cached[args] = f(*args)
        return cached[args]
    return wrapper


def vars_to_refs(variables):
    """Variables as references, which hash by identity (a variable does not)."""
    if isinstance(variables, list):
        return tuple(vars_to_refs(v) for v in variables)
    return variables.ref()


def refs_to_vars(refs):
    """The variables behind references made by :func:`vars_to_refs`."""
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()
