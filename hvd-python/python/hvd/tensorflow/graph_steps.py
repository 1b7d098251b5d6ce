"""One run of a TensorFlow 1 graph (``session.run``) whose collective failed fails the
rest of its collectives at once.

TensorFlow does not stop a graph run at its first error: every op already able to run
still runs before ``session.run`` returns it. A collective that runs after its run
failed waits for ranks that have given up on that run, until the stall shutdown fails
it too; a graph of many collectives would take that long once per collective. Every
collective of a graph takes the run's token (one ``Timestamp`` op of the graph,
evaluated once per run) as an input, so it knows its run, and refuses to start once a
collective of the same run failed on this rank. Inside ``tf.function`` this is not
needed: TensorFlow orders stateful ops there, and none after a failed one runs.
"""

import collections
import threading

import tensorflow as tf

# The failed runs this rank remembers: a run's remaining collectives start soon after
# its failure, so the last few suffice.
_REMEMBERED = 64
_lock = threading.Lock()
_failed = collections.OrderedDict()


class EarlierCollectiveFailed(RuntimeError):
    """A collective not started because one of the same graph run failed before it;
    ``error_code`` is the TensorFlow error code of that failure, if it had one."""

    def __init__(self, message, error_code):
        super().__init__(message)
        self.error_code = error_code


def token(graph):
    """The run token of ``graph`` (a TensorFlow 1 graph), made once: outside control
    flow and control dependencies, so that every collective of the graph can take it."""
    made = getattr(graph, "_hvd_run_token", None)
    if made is None:
        with graph.as_default(), tf.init_scope(), tf.device("/CPU:0"):
            made = tf.timestamp(name="HorovodRunToken")
        graph._hvd_run_token = made
    return made


def check(graph_id, run, what):
    """Raises when a collective of this run (``run``, the token's value) failed."""
    with _lock:
        cause = _failed.get((graph_id, run))
    if cause is not None:
        text, code = cause
        raise EarlierCollectiveFailed(
            f"{what} was not started: a collective of the same graph run failed on this "
            f"rank before it: {text}", code)


def failed(graph_id, run, error):
    """Records that a collective of this run failed with ``error``."""
    with _lock:
        _failed.setdefault((graph_id, run), (str(error), getattr(error, "error_code", None)))
        while len(_failed) > _REMEMBERED:
            _failed.popitem(last=False)
