"""The job as every framework front sees it: starting and ending it, this rank's place in
it, what this build of hvd contains, and the Timeline."""

import atexit

from hvd import _hvd
from hvd.common import ops
from hvd.common.process_sets import ProcessSet


def init(comm=None, process_sets=None):
    """Joins the job the launcher started (hvdrun, horovodrun, mpirun, torchrun, or
    ``hvd.run``); without one, a job of one rank. A second call is a no-op; after
    ``shutdown()`` it starts the job again (every rank must do the same, as in Horovod).

    ``process_sets``: ProcessSet objects created at start (``"dynamic"`` or None: none;
    hvd always allows ``add_process_set`` later). ``comm`` must be None: the job is the
    launcher's ranks (use ``process_sets`` for subsets).
    """
    if comm is not None:
        raise ValueError(
            "hvd.init(comm=...) is not supported: the job is every rank the launcher "
            "started; use hvd.init(process_sets=[...]) or hvd.add_process_set() for subsets")
    if isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError(f"process_sets must be a list of ProcessSet objects or "
                             f"'dynamic', not {process_sets!r}")
        process_sets = None
    sets = list(process_sets or [])
    for ps in sets:
        if not isinstance(ps, ProcessSet):
            raise ValueError(f"process_sets must hold ProcessSet objects, not "
                             f"{type(ps).__name__}")
    if _hvd.init([ps.ranks for ps in sets]):
        # A new job: unnamed operations are numbered from the start on every rank.
        ops.restart_names()
        for i, ps in enumerate(sets):
            ps.process_set_id = i + 1


shutdown = _hvd.shutdown
# Leave the job cleanly at exit, so the other ranks see a shutdown, not a lost rank.
atexit.register(_hvd.shutdown)
is_initialized = _hvd.is_initialized
is_homogeneous = _hvd.is_homogeneous


def rank():
    """This process's rank in the job."""
    return _hvd.topology()[0]


def size():
    """How many ranks the job has."""
    return _hvd.topology()[1]


def local_rank():
    """This process's rank among the ranks of its host."""
    return _hvd.topology()[2]


def local_size():
    """How many ranks run on this host."""
    return _hvd.topology()[3]


def cross_rank():
    """This host's index among the job's hosts."""
    return _hvd.topology()[4]


def cross_size():
    """How many hosts the job spans."""
    return _hvd.topology()[5]


def start_timeline(file_path, mark_cycles=False):
    """Starts recording the Timeline into ``file_path`` (rank 0 writes it; call it on
    every rank), marking every negotiation cycle when ``mark_cycles``. hvd allows it
    whatever ``HOROVOD_TIMELINE`` says (``DYNAMIC`` means no file until this call)."""
    _hvd.start_timeline(str(file_path), bool(mark_cycles))


stop_timeline = _hvd.stop_timeline


# Build probes: what this build of hvd contains, and what the running job uses. hvd's
# own transports play the part of Horovod's Gloo: its TCP transport (between hosts) and
# shared memory (within one) carry both the negotiation and the data.

def gloo_built():
    """True: hvd's own TCP transport, which takes Gloo's place, is in every build."""
    return "tcp" in _hvd.built_transports()


def gloo_enabled():
    """Whether the running job uses hvd's own transports (TCP, shared memory, RDMA) for
    negotiation and data, as Horovod's Gloo controller would; False before ``init`` and
    under the MPI transport."""
    return is_initialized() and _hvd.transport() != "mpi"


def transport():
    """The transport the running job got: ``shm``, ``tcp``, ``hierarchical``, ``mpi`` or
    ``rdma``; CUDA tensors go through NCCL beside it when NCCL loaded. An error before
    ``init``."""
    return _hvd.transport()


def mpi_built():
    """Whether this build has hvd's MPI transport (the Python wheel has not)."""
    return "mpi" in _hvd.built_transports()


def mpi_enabled():
    """Whether the running job uses the MPI transport."""
    return is_initialized() and _hvd.transport() == "mpi"


def mpi_threads_supported():
    """Whether MPI may be called from other threads. MPI must be enabled, as in Horovod;
    this build's jobs never run on MPI, so this raises ValueError naming the transport in
    use."""
    running = _hvd.transport() if is_initialized() else "none (hvd.init() not called)"
    raise ValueError(
        f"MPI is not enabled: this build of hvd's Python front has no MPI transport "
        f"(hvd.mpi_built() is False), and the job's transport is {running}")


def nccl_built():
    """The version code of the NCCL this process loads (``HVD_NCCL_LIBRARY``, else
    ``libnccl.so.2``), as Horovod's build answers with its NCCL's; 0 when none loads. A
    job's CUDA tensors go to it by device pointer (see ``hvd.torch``)."""
    return _hvd.nccl_version()


def cuda_built():
    """Whether this process reaches CUDA devices: hvd loads the CUDA driver at run time
    and sees at least one device (every build can)."""
    return _hvd.cuda_device_count() > 0


def rocm_built():
    """False: no ROCm support in this build."""
    return False


def ddl_built():
    """False: IBM DDL is not supported."""
    return False


def ccl_built():
    """False: Intel oneCCL is not supported."""
    return False
