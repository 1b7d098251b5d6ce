"""Horovod's DistributedOptimizer: any torch optimizer, stepping with gradients combined
over the ranks. Each gradient is allreduced from its parameter's hook as soon as backward
has accumulated it, so communication overlaps the rest of backward and Tensor Fusion
packs the small ones together. With ``op=hvd.Adasum`` each rank steps on its own
gradients and the ranks' updates are combined with Adasum instead."""

import contextlib
import warnings

import torch

from hvd.common.basics import size
from hvd.common.ops import Adasum, Average, Sum
from hvd.common.process_sets import global_process_set
from hvd.torch.compression import Compression
from hvd.torch.functions import broadcast_object
from hvd.torch.mpi_ops import (
    allreduce_async_,
    grouped_allreduce_async_,
    sparse_allreduce_async,
    synchronize,
)

def _parameter_names(param_groups, named_parameters):
    """Every parameter's name, from ``named_parameters`` (checked for duplicates and
    missing parameters) or by position."""
    if named_parameters is None:
        return {p: f"allreduce.noname.{i}.{j}" for i, group in enumerate(param_groups)
                for j, p in enumerate(group["params"])}
    named_parameters = list(named_parameters)
    if any(not isinstance(pair, tuple) for pair in named_parameters):
        raise ValueError("named_parameters should be a sequence of (name, parameter) "
                         "tuples, usually model.named_parameters()")
    names = [name for name, _ in named_parameters]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"parameter names in named_parameters must be unique; "
                         f"duplicates: {duplicates}")
    by_param = {p: name for name, p in named_parameters}
    unnamed = [p for group in param_groups for p in group["params"] if p not in by_param]
    if unnamed:
        raise ValueError(f"{len(unnamed)} parameter(s) of the optimizer are missing from "
                         "named_parameters")
    return {p: f"allreduce.{name}" for p, name in by_param.items()}


def _groups(groups, parameters, names, process_set):
    """Parameter -> its group (a tuple) for explicit allreduce groups: ``groups`` is a
    number of groups to split the parameters into, or lists of parameters (the rest each
    alone). The order is rank 0's, so every rank forms the same groups."""
    order = broadcast_object([names[p] for p in parameters], root_rank=_root(process_set),
                             name="optimizer.groups", process_set=process_set)
    by_name = {names[p]: p for p in parameters}
    ordered = [by_name[n] for n in order if n in by_name]
    if isinstance(groups, int):
        per = -(-len(ordered) // groups)
        split = [tuple(ordered[i:i + per]) for i in range(0, len(ordered), per)]
    else:
        listed = [tuple(p for p in ordered if any(p is q for q in group)) for group in groups]
        grouped = {id(p) for group in listed for p in group}
        split = [g for g in listed if g] + [(p,) for p in ordered if id(p) not in grouped]
    return {p: group for group in split for p in group}


def _after_accumulation(p, hook):
    """Calls ``hook`` each time backward has accumulated ``p``'s gradient; returns what
    keeps the hook registered."""
    if hasattr(p, "register_post_accumulate_grad_hook"):
        return [p.register_post_accumulate_grad_hook(hook)]
    # Older torch: hook the parameter's gradient accumulator, and keep it alive.
    accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
    return [accumulator.register_hook(hook), accumulator]


def _root(process_set):
    return process_set.ranks[0] if process_set.ranks else 0


def _check_groups(groups):
    if groups is None:
        return
    if isinstance(groups, int):
        if groups <= 0:
            raise ValueError("groups should be a positive number of groups or lists of "
                             "parameters")
        return
    if not isinstance(groups, list):
        raise ValueError("groups should be a positive number of groups or a list of lists "
                         "of torch.Tensor")
    seen = set()
    for group in groups:
        for p in group:
            if not isinstance(p, torch.Tensor):
                raise ValueError("groups must consist of torch.Tensor.")
            if id(p) in seen:
                raise ValueError("A parameter can only appear once in groups.")
            seen.add(id(p))


class _DistributedOptimizer(torch.optim.Optimizer):
    _hvd_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._op = op
        self._predivide = gradient_predivide_factor
        self._sparse_as_dense = sparse_as_dense
        self._process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step
        self._parameter_names = _parameter_names(self.param_groups, named_parameters)
        self._requires_update = [p for group in self.param_groups for p in group["params"]
                                 if p.requires_grad]
        self._allreduce_delay = {p: backward_passes_per_step for p in self._requires_update}
        self._handles = {}
        self._hooks = []
        self._synchronized = False
        self._should_synchronize = True
        self._group_of = {}
        self._group_ready = {}
        # A rank outside the process set trains on its own gradients: nothing to hook.
        if process_set.included():
            if groups is not None:
                self._group_of = _groups(groups, self._requires_update,
                                         self._parameter_names, process_set)
                self._group_ready = {g: 0 for g in set(self._group_of.values())}
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._forget_pending()
        return super(self.__class__, self).load_state_dict(*args, **kwargs)

    def _forget_pending(self):
        """Drops what a step had started: the handles of allreduces in flight (after a
        failed elastic round their results never come), the accumulation counts and the
        groups' readiness."""
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        for group in self._group_ready:
            self._group_ready[group] = 0

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for p in self._requires_update:
            self._hooks.extend(_after_accumulation(p, self._make_hook(p)))

    def _make_hook(self, p):
        def hook(*_):
            if self._handles.get(p, (None, None))[0] is not None and \
                    self._allreduce_delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times "
                    "before optimizer.step(); increase backward_passes_per_step to "
                    "accumulate gradients locally.")
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] > 0:
                self._handles[p] = (None, None)
                return
            group = self._group_of.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
                return
            self._handles[p] = (None, None)
            self._group_ready[group] += 1
            if self._group_ready[group] == len(group):
                self._group_ready[group] = 0
                for member in group:
                    self._handles.pop(member, None)
                self._handles[group] = self._grouped_allreduce_async(group)
        return hook

    def _scale_factors(self):
        if self._op is Average:
            # Average divides by the set's size after the sum; the predivide factor
            # moves part of that division before it.
            return 1.0 / self._predivide, self._predivide
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # No gradient on this rank: it contributes zeros, as in Horovod.
            p.grad = torch.zeros_like(p)
        name = self._parameter_names[p]
        grad = p.grad
        if grad.is_sparse:
            if not self._sparse_as_dense:
                return sparse_allreduce_async(grad, name=name, op=self._op,
                                              process_set=self._process_set), None
            grad = grad.to_dense()
        wire, ctx = self._compression.compress(grad)
        prescale, postscale = self._scale_factors()
        handle = allreduce_async_(wire, name=name, op=self._op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self._process_set)
        return handle, (wire, ctx)

    def _grouped_allreduce_async(self, group):
        for p in group:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        compressed = [self._compression.compress(p.grad) for p in group]
        prescale, postscale = self._scale_factors()
        handle = grouped_allreduce_async_([wire for wire, _ in compressed],
                                          name=self._parameter_names[group[0]], op=self._op,
                                          prescale_factor=prescale,
                                          postscale_factor=postscale,
                                          process_set=self._process_set)
        return handle, compressed

    def _apply(self, p, reduced):
        """Writes the combined gradient into ``p.grad``."""
        if p.grad.is_sparse:
            if not reduced.is_sparse:
                reduced = reduced.to_sparse()
            # Sparse gradients cannot be assigned into: replace the values.
            p.grad.zero_().add_(reduced)
        elif reduced.data_ptr() != p.grad.data_ptr():
            p.grad.copy_(reduced)

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hooks did not run:
        parameters unused on this rank) and writes the results into ``.grad``. Nothing to
        do on a rank outside the optimizer's process set."""
        if not self._process_set.included():
            self._synchronized = True
            return
        started = {p for key in self._handles for p in (key if isinstance(key, tuple)
                                                        else (key,))}
        for p in self._requires_update:
            if p not in started:
                self._handles[p] = self._allreduce_grad_async(p)
        for key, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[key] = self._allreduce_grad_async(key)
        for key, (handle, ctx) in self._handles.items():
            if isinstance(key, tuple):
                for p, out, (_, c) in zip(key, synchronize(handle), ctx):
                    self._apply(p, self._compression.decompress(out, c))
                    self._allreduce_delay[p] = self.backward_passes_per_step
                continue
            if callable(handle):
                reduced = handle()
            else:
                synchronize(handle)
                wire, c = ctx
                reduced = self._compression.decompress(wire, c)
            self._apply(key, reduced)
            self._allreduce_delay[key] = self.backward_passes_per_step
        self._handles.clear()
        for group in self._group_ready:
            self._group_ready[group] = 0
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Within it, ``step()`` does not synchronize (call ``synchronize()`` yourself,
        e.g. before clipping gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(); the gradients were synchronized "
                              "again")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if any(handle is not None for handle, _ in self._handles.values()):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize()")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """Adasum's optimizer (Horovod's delta optimizer): each parameter takes the wrapped
    optimizer's step on this rank's gradient as soon as backward has it, and the ranks'
    updates (new value minus old) are combined with Adasum; ``step()`` applies the
    combination to the value before the update."""

    _hvd_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self._parameter_names = _parameter_names(self.param_groups, named_parameters)
        self._requires_update = [p for group in self.param_groups for p in group["params"]
                                 if p.requires_grad]
        self._allreduce_delay = {p: backward_passes_per_step for p in self._requires_update}
        # Each parameter's value before its update.
        self._starts = {p: torch.zeros_like(p, requires_grad=False)
                        for p in self._requires_update}
        self._handles = {}
        self._hooks = [kept for p in self._requires_update
                       for kept in _after_accumulation(p, self._make_hook(p))]

    def _forget_pending(self):
        """Drops the updates in flight and the accumulation counts (see
        ``_DistributedOptimizer._forget_pending``)."""
        self._handles = {}
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _make_hook(self, p):
        def hook(*_):
            if self._handles.get(p, (None, None))[0] is not None and \
                    self._allreduce_delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times "
                    "before optimizer.step(); increase backward_passes_per_step to "
                    "accumulate gradients locally.")
            self._allreduce_delay[p] -= 1
            self._handles[p] = (self._update_async(p) if self._allreduce_delay[p] == 0
                                else (None, None))
        return hook

    def _update_async(self, p):
        """Steps ``p`` alone with the wrapped optimizer and starts the Adasum of its
        update; ``p`` holds the update until ``step()``."""
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        start = self._starts[p]
        start.copy_(p.detach())
        kept = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [q for q in group["params"] if q is p]
        try:
            super(self.__class__, self).step()
        finally:
            for group, params in zip(self.param_groups, kept):
                group["params"] = params
        with torch.no_grad():
            p.sub_(start)
        wire, ctx = self._compression.compress(p.detach())
        handle = allreduce_async_(wire, name=self._parameter_names[p], op=Adasum)
        return handle, (wire, ctx)

    def synchronize(self):
        pass

    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update:
            handle, ctx = self._handles.get(p, (None, None))
            if handle is None:
                handle, ctx = self._update_async(p)
            wire, c = ctx
            synchronize(handle)
            delta = self._compression.decompress(wire, c)
            start = self._starts[p]
            with torch.no_grad():
                start.add_(delta)
                p.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if any(handle is not None for handle, _ in self._handles.values()):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize()")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=global_process_set):
    """Wraps ``optimizer`` so that ``step()`` uses gradients combined over the ranks
    (averaged by default; ``op=hvd.Sum``; ``op=hvd.Adasum`` combines the ranks' updates
    with Adasum). Gradients are named after ``named_parameters``, which every rank must
    give alike. ``groups`` (a number, or lists of parameters) allreduces parameters in
    explicit groups; ``sparse_as_dense`` allreduces sparse gradients as dense tensors
    (else their indices and values are allgathered); ``process_set`` combines over a
    subset of the ranks (a rank outside it trains on its own gradients)."""
    if op not in (Average, Sum, Adasum):
        raise ValueError(f"DistributedOptimizer: op must be hvd.Average, hvd.Sum or "
                         f"hvd.Adasum, not {op!r}")
    if gradient_predivide_factor != 1.0 and op is not Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups`",
                      DeprecationWarning)
        groups = groups if groups is not None else num_groups
    _check_groups(groups)
    base = optimizer.__class__
    if op is Adasum and size() > 1:
        if process_set is not global_process_set:
            raise NotImplementedError("Adasum does not support non-global process sets yet.")
        cls = type(base.__name__, (base,), dict(_DistributedAdasumOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step)
    cls = type(base.__name__, (base,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step, op, gradient_predivide_factor, groups,
               sparse_as_dense, process_set)
