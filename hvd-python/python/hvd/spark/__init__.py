"""hvd on Spark. ``hvd.spark.run`` (Horovod's) runs a function on ``num_proc`` hvd ranks,
the tasks of one Spark barrier stage: a rank under Spark is a rank under hvdrun (the
same variables, numbered host by host, rank 0 serving the job's store). The processes
``pyspark.ml.torch.distributor.TorchDistributor`` starts need nothing of this module:
``hvd.init()`` reads the torchrun variables they get. Needs pyspark."""

import os
import secrets

from hvd.runner import placement


def run(fn, args=(), kwargs=None, num_proc=None, start_timeout=None, env=None, nics=None,
        use_mpi=None, use_gloo=None, extra_mpi_args=None, stdout=None, stderr=None,
        verbose=1, prefix_output_with_timestamp=False, executable=None):
    """``fn(*args, **kwargs)`` on ``num_proc`` ranks (Spark's default parallelism unless
    given), each a task of one barrier stage of the active Spark session; the results
    in rank order. ``start_timeout`` bounds how long the ranks wait for each other
    (seconds), ``env`` is set in every rank's environment, ``nics`` names the network
    interfaces between hosts. The other arguments are Horovod's, kept for its callers:
    Spark starts the tasks and hvd chooses its transports, and each task's output goes
    where Spark sends it."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError("hvd.spark.run needs an active Spark session "
                           "(SparkSession.builder.getOrCreate())")
    context = session.sparkContext
    num_proc = num_proc or context.defaultParallelism
    task = _Task(fn, tuple(args), dict(kwargs or {}), dict(env or {}), start_timeout,
                 nics, secrets.token_hex(16))
    ranked = context.parallelize(range(num_proc), num_proc).barrier() \
        .mapPartitions(task).collect()
    return [result for _, result in sorted(ranked, key=lambda r: r[0])]


class _Task:
    """What each barrier task runs: it finds its rank among the stage's tasks (numbered
    host by host), learns rank 0's store from it, and runs the function as a rank."""

    def __init__(self, fn, args, kwargs, env, start_timeout, nics, secret):
        self.fn, self.args, self.kwargs, self.env = fn, args, kwargs, env
        self.start_timeout, self.nics, self.secret = start_timeout, nics, secret

    def __call__(self, _):
        from pyspark import BarrierTaskContext

        from hvd.common import basics

        context = BarrierTaskContext.get()
        hosts = [info.address.rsplit(":", 1)[0] for info in context.getTaskInfos()]
        order = placement.group_by_node(hosts)
        rank = order.index(context.partitionId())
        # Every task learns rank 0's port: allGather answers in partition order.
        ports = context.allGather(str(placement.free_port() if rank == 0 else 0))
        hosts = [hosts[task] for task in order]
        job = placement.job_environment(hosts[0], int(ports[order[0]]),
                                        self.start_timeout, self.nics, self.secret)
        place = placement.rank_environments(hosts)[rank]
        # Spark reuses its Python workers: the job's variables go once the task is done.
        saved = dict(os.environ)
        try:
            os.environ.update(self.env)
            placement.rendezvous({**job, **place})
            result = self.fn(*self.args, **self.kwargs)
        finally:
            basics.shutdown()
            os.environ.clear()
            os.environ.update(saved)
        yield rank, result
