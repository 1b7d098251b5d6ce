"""hvd on Ray: ``RayExecutor`` (Horovod's executor) runs functions on hvd ranks that are
Ray actors; ``HorovodTrainer`` and ``HorovodConfig`` (Ray Train's) train with hvd under
Ray Train. A rank under Ray is a rank under hvdrun: the same variables, the same
rendezvous, the same transports; an elastic ``RayExecutor`` (``min_workers``) forms
hvdrun's elastic rounds over Ray's nodes. Needs Ray: ``pip install 'ray[train]'``."""

_EXPORTS = {
    "RayExecutor": "hvd.ray.runner",
    "RaySettings": "hvd.ray.runner",
    "WorkerFailedError": "hvd.ray.failure",
    "HorovodTrainer": "hvd.ray.trainer",
    "HorovodConfig": "hvd.ray.trainer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    # Imported when first used: Ray Train takes seconds to import, and an executor's
    # user need not pay for it.
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hvd.ray' has no attribute {name!r}")
    import importlib
    try:
        module = importlib.import_module(_EXPORTS[name])
    except ModuleNotFoundError as e:
        if e.name is None or not e.name.startswith("ray"):
            raise
        raise ModuleNotFoundError(
            f"hvd.ray.{name} needs Ray, which is not installed: pip install 'ray[train]'",
            name=e.name) from None
    return getattr(module, name)
