"""Whether the job is data-bound, and which rank's input holds it back, for a user's own
input pipeline (``hvd.torch.data.instrument``, ``hvd.tensorflow.data.instrument``).

Every rank times each step of its loop: the wait in ``next()`` for the batch, the time
blocked in hvd's collectives (counted by the extension in every handle's ``wait`` and
in ``barrier``), and the step's wall time, from one ``next()`` to the next. When the
epoch's iterator is exhausted, the ranks exchange these three numbers a step (one small
allgather) and hvd splits every step into data wait, compute, own communication and
waiting for other ranks, charging the job's wait to the rank whose data was late; rank 0
logs one line, ``data-bound 23 % of the epoch (...): rank 3 waited for data 41 % of its
time, and its data held the others back in 17 of 40 steps`` (a warning from 5 %, else
at info), and every rank keeps the numbers in ``report``.
"""

import array
import logging
import time

from hvd import _hvd
from hvd.common.ops import allgather_bytes

# The data-bound share from which the epoch's line is a warning rather than information.
WARN_AT = 0.05

_log = logging.getLogger("hvd")


class Instrumented:
    """Iterates over ``iterable`` as it would, timing each step. Every rank must iterate
    over the same number of batches an epoch (as ``DistributedSampler`` gives them),
    and run each epoch to its end: the exchange happens when the iterator is
    exhausted, on every rank alike. An epoch left early (``break``) is not reported.

    ``report`` is the last epoch's attribution (None before the first): ``line``,
    ``data_bound`` (0 to 1), ``data_lost`` and ``wall`` (seconds), ``steps``,
    ``culprit`` (the rank charged, or None) and ``ranks`` (per rank: ``data``,
    ``compute``, ``own_comm``, ``waiting``, ``wall`` in seconds, ``late_steps``)."""

    def __init__(self, iterable, process_set=None, log=True):
        self._iterable = iterable
        self._process_set = process_set
        self._log = log
        self.report = None

    def __len__(self):
        return len(self._iterable)

    def __getattr__(self, name):
        # The wrapped loader's own attributes (dataset, batch_size, sampler, ...); never
        # this object's own, which are missing only while it is being built or copied.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._iterable, name)

    def __iter__(self):
        steps = array.array("d")
        source = iter(self._iterable)
        previous = None
        while True:
            started, comm = time.perf_counter(), _hvd.comm_seconds()
            if previous is not None:
                # The step ran from the previous next() to this one.
                began, data, comm_before = previous
                steps.extend((data, comm - comm_before, started - began))
            _hvd.data_wait_begin()
            try:
                batch = next(source)
            except StopIteration:
                break
            finally:
                _hvd.data_wait_end()
            previous = (started, time.perf_counter() - started, comm)
            yield batch
        self.report = self._exchange(steps)

    def _exchange(self, steps):
        gathered = allgather_bytes(steps.tobytes(), "hvd.data_stall", self._process_set)
        ranks = []
        for raw in gathered:
            times = array.array("d")
            times.frombytes(raw)
            ranks.append(list(times))
        report = _hvd.stall_report(ranks)
        if self._log and _hvd.topology()[0] == 0:
            level = logging.WARNING if report["data_bound"] >= WARN_AT else logging.INFO
            _log.log(level, report["line"])
        return report


def instrument(iterable, process_set=None, log=True):
    """``iterable`` (a PyTorch ``DataLoader``, a ``tf.data.Dataset`` iterated eagerly,
    any iterable of batches), timed step by step and attributed at the end of each
    epoch: see :class:`Instrumented`."""
    return Instrumented(iterable, process_set=process_set, log=log)
