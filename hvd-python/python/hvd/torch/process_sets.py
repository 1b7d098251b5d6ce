"""Process sets: collectives over a subset of the ranks, as in Horovod."""

from hvd import _hvd


class ProcessSet:
    """A group of global ranks. Pass it to ``init(process_sets=[...])`` or
    ``add_process_set``; collectives take it as ``process_set=``."""

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        self.process_set_id = None

    def _id(self):
        if self.process_set_id is None:
            raise ValueError(f"process set {self.ranks} is not registered: pass it to "
                             "hvd.init(process_sets=...) or hvd.add_process_set()")
        return self.process_set_id

    def size(self):
        return len(_hvd.process_set_ranks(self._id()))

    def rank(self):
        """This rank's rank within the set, or None when it is not a member."""
        ranks = _hvd.process_set_ranks(self._id())
        me = _hvd.topology()[0]
        return ranks.index(me) if me in ranks else None

    def included(self):
        return self.rank() is not None

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    def __init__(self):
        super().__init__([])
        self.process_set_id = 0

    @property
    def ranks(self):
        return _hvd.process_set_ranks(0) if _hvd.is_initialized() else []

    @ranks.setter
    def ranks(self, _):
        pass


global_process_set = _GlobalProcessSet()


def add_process_set(process_set):
    """Registers a process set (a ProcessSet or a list of ranks); every rank must call it."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    process_set.process_set_id = _hvd.add_process_set(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    """Removes a registered process set; every rank must call it."""
    _hvd.remove_process_set(process_set._id())
    process_set.process_set_id = None
    return True
