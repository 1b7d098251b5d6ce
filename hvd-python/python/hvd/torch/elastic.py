"""Elastic training for PyTorch, as ``horovod.torch.elastic``: ``hvd.elastic.run``,
``TorchState`` (a model, an optimizer, samplers and plain values) and ``ElasticSampler``
(every example once per epoch, whatever the job's size). See ``hvd.common.elastic``."""

import copy

import torch

from hvd.common import basics
from hvd.common.elastic import HostsUpdatedInterrupt, ObjectState, State, run  # noqa: F401
from hvd.torch.functions import (
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from hvd.torch.marks import is_distributed


class ElasticSampler(torch.utils.data.Sampler):
    """The examples of ``dataset`` for this rank, through resizes and rollbacks.

    Each epoch walks one permutation (from ``seed + epoch``, the same on every rank) and
    remembers how far the job got (``processed``, part of the state). Iterating gives
    this rank every ``size``-th example of what is left, from its rank on, so the ranks'
    shards are disjoint and cover the rest; ``record_batch`` after each step moves the
    job on by exactly the examples the ranks consumed. After a failure the state goes
    back to its last commit, and after a resize the rest is shared among the new ranks:
    no example is repeated or skipped, and nothing is padded. When what is left does not
    divide evenly, the ranks' last batches differ and some ranks have one fewer: those
    call ``hvd.join()`` so the others' last allreduces complete.
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed = 0
        self._start = 0
        self.reset()

    def _order(self):
        if not self.shuffle:
            return list(range(len(self.dataset)))
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(len(self.dataset), generator=generator).tolist()

    def reset(self):
        """Shares what is left of the epoch among the job's ranks as they are now."""
        initialized = basics.is_initialized()
        self.rank = basics.rank() if initialized else 0
        self.size = basics.size() if initialized else 1
        self._mine = self._order()[self.processed:][self.rank::self.size]

    def set_epoch(self, epoch):
        """Starts epoch ``epoch`` from its first example."""
        self.epoch = epoch
        self.processed = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Moves the job on past the step whose index in this iteration is ``batch_idx``
        (every rank took ``batch_size`` examples, fewer only at the end)."""
        consumed = (batch_idx + 1) * batch_size * self.size
        self.processed = min(self._start + consumed, len(self.dataset))

    def __iter__(self):
        self.reset()
        self._start = self.processed
        return iter(self._mine)

    def __len__(self):
        return len(self._mine)

    def state_dict(self):
        return {"epoch": self.epoch, "processed": self.processed}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]
        self.processed = state["processed"]
        self.reset()


class TorchState(ObjectState):
    """The state of a PyTorch job: ``model``'s parameters and buffers, ``optimizer``'s
    state, the ``ElasticSampler``s given as keyword arguments, and any other keyword
    arguments as plain values (``state.epoch``). A rank that starts with an empty
    optimizer (a newcomer) gets the root's state filled in at sync."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        self._samplers = {name: value for name, value in kwargs.items()
                          if isinstance(value, ElasticSampler)}
        for name, sampler in self._samplers.items():
            setattr(self, name, sampler)
        values = {name: value for name, value in kwargs.items()
                  if name not in self._samplers}
        super().__init__(bcast_object=broadcast_object, get_rank=basics.rank, **values)

    def save(self):
        if self.model is not None:
            self._saved_model = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict())
        self._saved_samplers = {name: sampler.state_dict()
                                for name, sampler in self._samplers.items()}
        super().save()

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(self._saved_samplers[name])
        super().restore()

    def sync(self, root_rank=0):
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank, model=self.model)
        for name, sampler in self._samplers.items():
            state = broadcast_object(sampler.state_dict(), root_rank,
                                     name=f"elastic.sampler.{name}")
            sampler.load_state_dict(state)
        super().sync(root_rank)

    def reset(self):
        if self.optimizer is not None and is_distributed(self.optimizer):
            self.optimizer._forget_pending()
        for sampler in self._samplers.values():
            sampler.reset()
