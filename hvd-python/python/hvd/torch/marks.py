"""How DistributedOptimizer marks the classes it makes (their base is the wrapped
optimizer), in a module of its own so that broadcasting and elastic state can tell a
distributed optimizer apart without importing the optimizer module, which imports them."""

# The class attribute DistributedOptimizer's classes set to True.
DISTRIBUTED = "_hvd_distributed"


def is_distributed(optimizer):
    """Whether ``optimizer`` was made by DistributedOptimizer."""
    return getattr(type(optimizer), DISTRIBUTED, False)
