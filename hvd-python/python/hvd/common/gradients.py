"""Gradients combined over the ranks, the part every framework shares (TensorFlow's
DistributedGradientTape, Keras's DistributedOptimizer on TensorFlow and on torch): which
gradients go, under which names, in which order, and what happens to local ones. The
framework brings the call that combines a list of its tensors."""

import warnings

from hvd.common.ops import Average


def check_groups(groups, num_groups, key):
    """Horovod's ``groups`` (or its deprecated ``num_groups``): a positive number of
    groups, or lists of variables (``key`` identifies one), each at most once."""
    if num_groups:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be "
                      "removed in v0.23.0.", DeprecationWarning)
        groups = groups if groups is not None else num_groups
    if groups is None:
        return None
    if isinstance(groups, list):
        seen = set()
        for group in groups:
            for v in group:
                if key(v) in seen:
                    raise ValueError("A variable can only appear once in groups.")
                seen.add(key(v))
        return groups
    if isinstance(groups, int) and not isinstance(groups, bool) and groups > 0:
        return groups
    raise ValueError("groups should be a non-negative integer or a list of list of "
                     "variables.")


class GradientReducer:
    """Combines gradients over ``process_set`` with ``combine(values, names, op,
    prescale_factor, postscale_factor)``, the framework's single call: ``op`` (Average
    by default, with ``gradient_predivide_factor`` of the division moved before the
    sum). Gradients of variables registered as local are not combined; with
    ``scale_local_gradients`` they are divided by the set's size (``divide(grad, n)``),
    as Horovod does. ``groups`` orders the submission (each listed group's gradients
    together); every gradient of a call goes in the one call whatever the groups, so
    Tensor Fusion packs across groups too. A rank outside the set keeps its own
    gradients. ``key(variable)`` identifies variables."""

    def __init__(self, prefix, combine, key, divide, op=Average,
                 gradient_predivide_factor=1.0, groups=None, process_set=None,
                 scale_local_gradients=True):
        if gradient_predivide_factor != 1.0 and op is not Average:
            raise ValueError("gradient_predivide_factor not supported with op != Average")
        self.prefix = prefix
        self.combine = combine
        self.key = key
        self.divide = divide
        self.op = op
        # Average divides by the set's size after the sum; the predivide factor moves
        # part of that division before it.
        self.prescale, self.postscale = (1.0 / gradient_predivide_factor,
                                         gradient_predivide_factor) \
            if op is Average else (1.0, 1.0)
        self.groups = groups
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self.local = set()

    def register_local(self, variable):
        """Gradients of ``variable`` stay this rank's own."""
        self.local.add(self.key(variable))

    def is_local(self, variable):
        return self.key(variable) in self.local

    def __call__(self, grads, variables, names):
        """``grads[i]`` (of ``variables[i]``; None for none) combined over the set, in one
        call, named ``<prefix>.<names[i]>``."""
        grads = list(grads)
        if not self.process_set.included():
            return grads
        picked = [i for i, (g, v) in enumerate(zip(grads, variables))
                  if g is not None and not self.is_local(v)]
        order = self._by_group(picked, variables)
        reduced = self.combine([grads[i] for i in order],
                               [f"{self.prefix}.{names[i]}" for i in order], self.op,
                               self.prescale, self.postscale)
        for i, g in zip(order, reduced):
            grads[i] = g
        if self.scale_local_gradients and self.local:
            for i, (g, v) in enumerate(zip(grads, variables)):
                if g is not None and self.is_local(v):
                    grads[i] = self.divide(g, self.process_set.size())
        return grads

    def _by_group(self, picked, variables):
        """The picked positions in submission order: listed group by listed group, then
        the rest. A number of groups keeps the order."""
        if not isinstance(self.groups, list):
            return picked
        position = {self.key(variables[i]): i for i in picked}
        ordered = [position.pop(self.key(v)) for group in self.groups for v in group
                   if self.key(v) in position]
        return ordered + [i for i in picked if self.key(variables[i]) in position]
