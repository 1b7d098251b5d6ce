"""Horovod's DistributedOptimizer: any torch optimizer, stepping with gradients averaged
over the ranks. Each gradient is allreduced from its parameter's hook as soon as backward
has accumulated it, so communication overlaps the rest of backward and Tensor Fusion
packs the small ones together."""

import contextlib
import warnings

import torch

from hvd.torch.compression import Compression
from hvd.torch.mpi_ops import Adasum, Average, Sum, allreduce_async_, synchronize
from hvd.torch.process_sets import global_process_set


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, process_set):
        super(self.__class__, self).__init__(params)
        if op is Adasum:
            raise ValueError("Adasum is not supported by hvd; use op=hvd.Average or hvd.Sum")
        if op not in (Average, Sum):
            raise ValueError(f"DistributedOptimizer: op must be hvd.Average or hvd.Sum, not {op!r}")
        if gradient_predivide_factor != 1.0 and op is not Average:
            raise ValueError("gradient_predivide_factor needs op=hvd.Average")
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1")
        self._compression = compression
        self._op = op
        self._predivide = gradient_predivide_factor
        self._process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step
        self._parameter_names = self._names(named_parameters)
        self._requires_update = [p for group in self.param_groups for p in group["params"]
                                 if p.requires_grad]
        self._allreduce_delay = {p: backward_passes_per_step for p in self._requires_update}
        self._handles = {}
        self._hooks = []
        self._synchronized = False
        self._should_synchronize = True
        self._register_hooks()

    def _names(self, named_parameters):
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            return {p: f"allreduce.noname.{i}" for i, p in enumerate(all_params)}
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
        unnamed = [p for p in all_params if p not in by_param]
        if unnamed:
            raise ValueError(f"{len(unnamed)} parameter(s) of the optimizer are missing from "
                             "named_parameters")
        return {p: f"allreduce.{by_param[p]}" for p in all_params}

    def _register_hooks(self):
        for p in self._requires_update:
            if hasattr(p, "register_post_accumulate_grad_hook"):
                self._hooks.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))
            else:
                # Older torch: hook the gradient accumulator of the parameter.
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                self._hooks.append(accumulator.register_hook(self._make_hook(p)))
                self._hooks.append(accumulator)

    def _make_hook(self, p):
        def hook(*_):
            if self._handles.get(p, (None, None))[0] is not None and \
                    self._allreduce_delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times "
                    "before optimizer.step(); increase backward_passes_per_step to "
                    "accumulate gradients locally.")
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # No gradient on this rank: it contributes zeros, as in Horovod.
            p.grad = torch.zeros_like(p)
        wire, ctx = self._compression.compress(p.grad)
        handle = allreduce_async_(wire, name=self._parameter_names[p], op=self._op,
                                  prescale_factor=1.0 / self._predivide,
                                  postscale_factor=self._predivide,
                                  process_set=self._process_set)
        return handle, (wire, ctx)

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hooks did not run:
        parameters unused on this rank) and writes the results into ``.grad``."""
        for p in self._requires_update:
            if p not in self._handles or self._handles[p][0] is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, (wire, ctx)) in self._handles.items():
            synchronize(handle)
            reduced = self._compression.decompress(wire, ctx)
            if reduced.data_ptr() != p.grad.data_ptr():
                p.grad.copy_(reduced)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
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
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "after optimizer.synchronize(); the gradients were "
                              "synchronized again")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if any(handle is not None for handle, _ in self._handles.values()):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize()")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, process_set=global_process_set):
    """Wraps ``optimizer`` so that ``step()`` uses gradients combined over the ranks
    (averaged by default). Gradients are named after ``named_parameters``; every rank must
    give the same names."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step, op, gradient_predivide_factor, process_set)
