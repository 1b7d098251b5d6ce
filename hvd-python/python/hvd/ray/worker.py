"""One rank of a ``RayExecutor`` job: a Ray actor that holds the rank's launcher variables
and runs the driver's functions with them, as a process hvdrun started would."""

import os
import socket

import ray

from hvd.common import basics
from hvd.runner import placement


class Worker:
    """The actor. Its process lives as long as the executor, so every function it runs
    belongs to one job: ``hvd.init()`` in any of them (and again after an
    ``hvd.shutdown()``) meets the other ranks at rank 0's store."""

    def __init__(self):
        self.executable = None

    def node(self):
        """Where Ray placed this actor: its node, the host's name, its process id and the
        GPUs Ray gave it."""
        return {"node_id": ray.get_runtime_context().get_node_id(),
                "hostname": socket.gethostname(), "pid": os.getpid(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    def free_port(self):
        return placement.free_port()

    def update_env_vars(self, env):
        """Sets ``env`` in the worker's environment (Horovod's name for this method)."""
        os.environ.update({k: str(v) for k, v in env.items()})

    def rendezvous(self, env):
        placement.rendezvous(env)

    def start_executable(self, executable_cls=None, args=None, kwargs=None):
        if executable_cls is not None:
            self.executable = executable_cls(*(args or ()), **(kwargs or {}))

    def execute(self, fn):
        """``fn(executable)``: the object ``start`` made (None without one)."""
        return self.run(fn, [self.executable], {})

    def run(self, fn, args, kwargs):
        try:
            return fn(*args, **kwargs)
        except BaseException:
            # The rank leaves the job, as a process that raises does under hvdrun: its
            # peers fail at once, naming it, rather than wait for it forever.
            basics.shutdown()
            raise
