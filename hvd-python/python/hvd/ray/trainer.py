"""``HorovodTrainer`` and ``HorovodConfig`` for Ray Train: the trainer Ray removed
(``ray.train.horovod``), on hvd. Ray Train starts, numbers and restarts the workers; the
backend gives each worker hvdrun's variables for the rank Ray Train gave it, with rank
0's store, before the training loop runs, and the loop calls ``hvd.init()``."""

from dataclasses import dataclass
from typing import Optional, Set

import ray
from ray.train.backend import Backend, BackendConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from hvd.runner import placement


@dataclass
class HorovodConfig(BackendConfig):
    """Ray Train's Horovod settings: ``timeout_s`` bounds how long the ranks wait for each
    other when the job starts (hvd's start timeout), ``nics`` names the network
    interfaces between nodes, ``key`` is the job's secret (a fresh one for each start of
    the workers when None). ``verbose``, the ssh settings and
    ``placement_group_timeout_s`` are Horovod's, kept for its callers: Ray Train places
    and starts the workers, so nothing logs in over ssh."""
    nics: Optional[Set[str]] = None
    verbose: int = 1
    key: Optional[str] = None
    ssh_port: Optional[int] = None
    ssh_identity_file: Optional[str] = None
    ssh_str: Optional[str] = None
    timeout_s: int = 300
    placement_group_timeout_s: int = 100

    @property
    def backend_cls(self):
        return _HvdBackend


class _HvdBackend(Backend):
    # Every worker of a node sees all the node's GPUs, as under Horovod, so that
    # hvd.local_rank() picks its own.
    share_cuda_visible_devices: bool = True

    def on_start(self, worker_group, backend_config):
        workers = worker_group.get_workers()
        # Ray Train numbers its workers node by node, as hvdrun does.
        ranks = placement.rank_environments([w.metadata.node_ip for w in workers],
                                            [w.metadata.hostname for w in workers])
        port = worker_group.execute_single(0, placement.free_port)
        job = placement.job_environment(workers[0].metadata.node_ip, port,
                                        backend_config.timeout_s, backend_config.nics,
                                        backend_config.key)
        ray.get([worker.execute_async(placement.rendezvous, {**job, **rank})
                 for worker, rank in zip(workers, ranks)])


class HorovodTrainer(DataParallelTrainer):
    """Ray Train's data-parallel trainer for hvd: ``train_loop_per_worker`` (taking
    ``train_loop_config`` when given) runs on ``scaling_config.num_workers`` workers;
    it calls ``hvd.init()`` and reports metrics and checkpoints with
    ``ray.train.report``, and resumes from ``ray.train.get_checkpoint()``."""

    def __init__(self, train_loop_per_worker, *, train_loop_config=None,
                 horovod_config=None, scaling_config=None, dataset_config=None,
                 run_config=None, datasets=None, metadata=None,
                 resume_from_checkpoint=None):
        super().__init__(
            train_loop_per_worker=train_loop_per_worker,
            train_loop_config=train_loop_config,
            backend_config=horovod_config or HorovodConfig(),
            scaling_config=scaling_config,
            dataset_config=dataset_config,
            run_config=run_config,
            datasets=datasets,
            metadata=metadata,
            resume_from_checkpoint=resume_from_checkpoint,
        )
