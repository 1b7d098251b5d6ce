"""Elastic training, framework-neutral: the loop over hvdrun's rendezvous rounds
(``run``), the state every rank keeps across them (``State``, ``ObjectState``), and the
interrupt a commit raises when hosts change. A framework module adds its own states
(``hvd.torch.elastic.TorchState``) and sampler.

Only a lost or silent peer (and a peer's shutdown) restores the last commit and moves to
the next round; any other error is a bug: it is reported to hvdrun, which ends the job,
and raised. See the book's "Elastic training" chapter (docs/src/elastic.md).
"""

import copy
import functools
import sys

from hvd import _hvd
from hvd.common import basics, ops


class HostsUpdatedInterrupt(RuntimeError):
    """hvdrun announced new or removed hosts: every rank leaves the round at the same
    commit, keeping its work, and meets again with the new set. ``skip_sync`` is
    Horovod's field; hvd always syncs a new round, which is what keeps a newcomer from
    waiting for a broadcast the others skip."""

    def __init__(self, skip_sync=False):
        super().__init__("the hosts changed: leaving the round at this commit")
        self.skip_sync = skip_sync


def _recoverable(error):
    """Whether the job goes on after ``error`` in a new round, as hvd's runtime decides
    (``recoverable``, set on every exception it raises)."""
    return getattr(error, "recoverable", False)


class State:
    """What a rank keeps across rounds. ``commit()`` saves it in memory and checks for
    host changes; after a failure every survivor ``restore()``s its last commit; when a
    round starts, the rank holding the newest commit ``sync``s it to every other rank."""

    def __init__(self):
        self._reset_callbacks = []
        self._commits = 0

    def register_reset_callbacks(self, callbacks):
        """Functions called (without arguments) after a reset, when the next round has
        formed (``hvd.size()`` is its size) and before the state is synced: what depends
        on the job's size (a learning rate scaled by it, a data loader's batch size) is
        recomputed there. Not called before the first round, as in Horovod."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state, then raises ``HostsUpdatedInterrupt`` if hvdrun announced host
        changes (at the same commit on every rank). Call it every few steps, on every
        rank."""
        self.save()
        self._commits += 1
        self.check_host_updates()

    def check_host_updates(self):
        """Raises ``HostsUpdatedInterrupt`` if hvdrun announced host changes since the
        round was formed. Collective: rank 0 asks hvdrun and every rank follows."""
        if _hvd.elastic_worker() is not None and _hvd.elastic_hosts_updated():
            raise HostsUpdatedInterrupt()

    def _sync_newest(self):
        """Brings every rank to the newest commit, from the lowest rank holding it; then
        keeps it as every rank's last commit."""
        root, newest = _hvd.elastic_newest_root(self._commits)
        self.sync(root)
        self._commits = newest
        self.save()

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self, root_rank=0):
        raise NotImplementedError

    def reset(self):
        pass


class ObjectState(State):
    """A state of plain Python values, given as keyword arguments and read and written
    as attributes (``state.epoch``). ``bcast_object(obj, root_rank)`` sends a picklable
    object from the root (the framework's ``broadcast_object``)."""

    def __init__(self, bcast_object, get_rank=None, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self, root_rank=0):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state, root_rank)
            self._set_attrs()


def run(func):
    """Decorates a training function ``func(state, *args, **kwargs)`` to run elastically
    under ``hvdrun --elastic`` (or ``--host-discovery-script``): through as many rounds
    as failures and host changes need, each starting with the state synced to the newest
    commit. Returns ``func``'s result, or ``None`` on a worker whose host was removed from
    the job (its process should end; it exits 0). Outside an elastic job it runs ``func``
    once, after syncing the state from rank 0."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not basics.is_initialized():
            basics.init()
        if _hvd.elastic_worker() is None:
            state.sync(0)
            state.save()
            return func(state, *args, **kwargs)
        # A failure before the first commit goes back to the start.
        state.save()
        while True:
            try:
                state._sync_newest()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt:
                why = "updated"
            except BaseException as error:
                if not _recoverable(error):
                    _hvd.elastic_report_fatal(f"{type(error).__name__}: {error}")
                    raise
                print(f"hvd: round failed, back to the last commit: {error}",
                      file=sys.stderr, flush=True)
                state.restore()
                why = "failed"
            _hvd.elastic_leave(why)
            if _hvd.elastic_join() is None:
                return None
            ops.job_changed()
            # As in Horovod: after a reset, not before the first round.
            state.on_reset()

    return wrapper
