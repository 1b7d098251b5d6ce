"""Process sets: collectives over a subset of the ranks, as in Horovod. Ranks are always
global ranks (``hvd.rank()``), a broadcast's root included."""

from hvd import _hvd


class ProcessSet:
    """A group of global ranks. Pass it to ``init(process_sets=[...])`` or
    ``add_process_set``; collectives take it as ``process_set=``."""

    def __init__(self, ranks):
        try:
            ranks = sorted(int(r) for r in ranks)
        except TypeError:
            raise ValueError(f"ProcessSet takes a list of global ranks, not "
                             f"{type(ranks).__name__} (hvd has no MPI communicators)") from None
        self.ranks = ranks
        self.process_set_id = None

    def _id(self):
        if self.process_set_id is None:
            raise ValueError(f"process set {self.ranks} is not registered: pass it to "
                             "hvd.init(process_sets=...) or hvd.add_process_set()")
        return self.process_set_id

    def _members(self):
        return _hvd.process_set_ranks(self._id())

    def size(self):
        """How many ranks the set has; None before it is registered."""
        if self.process_set_id is None:
            return None
        return len(self._members())

    def rank(self):
        """This rank's rank within the set; None before it is registered. Collectives
        still take global ranks (a broadcast's root)."""
        if self.process_set_id is None:
            return None
        members, me = self._members(), _hvd.topology()[0]
        if me not in members:
            raise ValueError(f"rank {me} is not a member of process set "
                             f"{self.process_set_id} (ranks {members})")
        return members.index(me)

    def included(self):
        """Whether this rank belongs to the set."""
        return _hvd.topology()[0] in self.ranks

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    """Every rank of the job."""

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


def members(process_set_id):
    """The global ranks of the registered set with this id (0: every rank)."""
    return _hvd.process_set_ranks(process_set_id)


def set_id(process_set):
    """The native id of ``process_set`` (None is the global set)."""
    return 0 if process_set is None else process_set._id()


def root_in_set(root_rank, process_set, op):
    """The set rank of ``root_rank``, a global rank that must belong to the set."""
    root_rank = int(root_rank)
    if process_set is None or process_set.process_set_id == 0:
        return root_rank
    members = process_set._members()
    if root_rank not in members:
        raise ValueError(f"{op}: root rank {root_rank} is not a member of process set "
                         f"{process_set.process_set_id} (ranks {members}); roots are "
                         "global ranks")
    return members.index(root_rank)


def add_process_set(process_set):
    """Registers a process set (a ProcessSet or a list of global ranks); every rank must
    call it, members or not. Returns the ProcessSet."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    process_set.process_set_id = _hvd.add_process_set(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    """Removes a registered process set; every rank must call it. Returns False for the
    global set and for a set that is not registered, as Horovod does."""
    if process_set.process_set_id in (None, 0):
        return False
    _hvd.remove_process_set(process_set.process_set_id)
    process_set.process_set_id = None
    return True
