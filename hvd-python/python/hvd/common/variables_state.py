"""An elastic state of framework variables: what TensorFlow's and Keras's states share.
The framework gives how to read a variable out (``to_numpy``) and how to broadcast a list
of them (``broadcast``); the state keeps the committed values a failure goes back to."""

from hvd.common.elastic import ObjectState


class VariablesState(ObjectState):
    """Variables (given by ``variables()``, read when needed, since a Keras optimizer
    makes its own on its first step) and plain values given as keyword arguments."""

    def __init__(self, variables, to_numpy, broadcast, bcast_object, **kwargs):
        self._variables = variables
        self._to_numpy, self._broadcast = to_numpy, broadcast
        self._saved_values = None
        super().__init__(bcast_object=bcast_object, **kwargs)
        # Until the first commit, a failure goes back to the values at the start.
        self._saved_values = self._values(self._variables())

    def _values(self, variables):
        return [self._to_numpy(v) for v in variables]

    def save(self):
        self._saved_values = self._values(self._variables())
        super().save()

    def restore(self):
        variables = self._variables()
        if self._saved_values is not None and len(self._saved_values) == len(variables):
            for variable, value in zip(variables, self._saved_values):
                variable.assign(value)
        super().restore()

    def sync(self, root_rank=0):
        variables = self._variables()
        if variables:
            self._broadcast(variables, root_rank)
        # What the ranks agreed on is what a failure goes back to, as for plain values.
        self._saved_values = self._values(variables)
        super().sync(root_rank)
