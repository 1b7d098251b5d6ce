"""Launching jobs from Python: ``horovodrun`` (Horovod's name for the hvdrun launcher this
wheel installs) and ``hvd.run``, Horovod's programmatic launcher."""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

# Horovod's elastic arguments and the hvdrun flags they become.
_ELASTIC = {
    "min_num_proc": "--min-np", "min_np": "--min-np",
    "max_num_proc": "--max-np", "max_np": "--max-np",
    "slots": "--slots-per-host", "reset_limit": "--reset-limit",
    "cooldown_range": "--blacklist-cooldown-range",
    "host_discovery_script": "--host-discovery-script",
    "elastic_timeout": "--elastic-timeout",
}


def _elastic_args(elastic):
    """hvdrun's flags for Horovod's elastic arguments (none: not elastic)."""
    if not elastic:
        return []
    args = [] if "host_discovery_script" in elastic else ["--elastic"]
    for name, value in sorted(elastic.items()):
        flag = _ELASTIC[name]
        values = value if isinstance(value, (list, tuple)) else [value]
        args += [flag, *(str(v) for v in values)]
    return args


def hvdrun_path():
    """The hvdrun binary installed with this package, else the first on PATH."""
    here = os.path.join(sysconfig.get_path("scripts"), "hvdrun")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("hvdrun")


def main():
    path = hvdrun_path()
    if path is None:
        sys.exit("horovodrun: the hvdrun launcher is not installed next to this Python "
                 "(reinstall the hvd wheel)")
    os.execv(path, [path] + sys.argv[1:])


def _launcher_args(num_proc, hosts, hostfile, start_timeout, ssh_port, ssh_identity_file,
                   output_filename, verbose, network_interfaces):
    args = ["-np", str(num_proc)]
    for flag, value in (("-H", hosts), ("--hostfile", hostfile),
                        ("--start-timeout", start_timeout), ("-p", ssh_port),
                        ("-i", ssh_identity_file), ("--output-filename", output_filename),
                        ("--network-interfaces", network_interfaces)):
        if value is not None:
            if isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            args += [flag, str(value)]
    if verbose:
        args.append("--verbose")
    return args


def run(func, args=(), kwargs=None, num_proc=None, hosts=None, hostfile=None,
        start_timeout=None, ssh_port=None, ssh_identity_file=None, disable_cache=None,
        output_filename=None, verbose=None, use_gloo=None, use_mpi=None, mpi_args=None,
        network_interface=None, network_interfaces=None, executable=None, np=None,
        **elastic):
    """Runs ``func(*args, **kwargs)`` on ``num_proc`` ranks (``np`` is Horovod's old name)
    under hvdrun, on this host or on ``hosts`` (``host:slots,...``) / ``hostfile``, and
    returns the ranks' return values in rank order. ``func`` travels by value
    (cloudpickle), so it may be defined in ``__main__``; it calls ``hvd.init()`` itself,
    as under any launcher, and its return values come back through the job. A rank that
    fails makes this raise RuntimeError after hvdrun's summary. Horovod's ``use_gloo`` is
    what hvd does anyway; ``use_mpi`` and ``mpi_args`` are refused. The elastic arguments
    (``min_np``, ``max_np``, ``slots``, ``reset_limit``, ``cooldown_range``,
    ``host_discovery_script``, ``elastic_timeout``) run the job elastically (a function
    wrapped in ``hvd.elastic.run``); the values returned are those of the last round's
    ranks."""
    elastic = {k: v for k, v in elastic.items() if v is not None}
    unknown = sorted(k for k in elastic if k not in _ELASTIC)
    if unknown:
        raise TypeError(f"run() got unexpected keyword arguments: {', '.join(unknown)}")
    if use_mpi or mpi_args:
        raise ValueError("hvd.run starts its ranks with hvdrun and runs them on hvd's own "
                         "transports; for MPI, start the program with mpirun instead")
    num_proc = num_proc if num_proc is not None else np
    if num_proc is None or int(num_proc) < 1:
        raise ValueError(f"hvd.run: num_proc (or np) must be a number of ranks, 1 or more; "
                         f"got {num_proc!r}")
    try:
        import cloudpickle
    except ImportError:
        raise ImportError("hvd.run sends the function to its ranks with cloudpickle: "
                          "pip install cloudpickle") from None
    launcher = hvdrun_path()
    if launcher is None:
        raise RuntimeError("hvd.run: the hvdrun launcher is not installed next to this "
                           "Python (reinstall the hvd wheel)")
    with tempfile.TemporaryDirectory(prefix="hvd-run-") as work:
        task = os.path.join(work, "task.pkl")
        with open(task, "wb") as f:
            cloudpickle.dump((func, tuple(args), dict(kwargs or {})), f)
        command = [launcher, *_launcher_args(
            int(num_proc), hosts, hostfile, start_timeout, ssh_port, ssh_identity_file,
            output_filename, verbose, network_interfaces or network_interface),
            *_elastic_args(elastic),
            executable or sys.executable, "-m", "hvd.runner.task", task, work]
        done = subprocess.run(command)
        if done.returncode != 0:
            raise RuntimeError(f"hvd.run: the job failed (hvdrun exit code "
                               f"{done.returncode}); hvdrun's summary above names the rank")
        from hvd.runner.task import results
        return results(work)
