"""Horovod's API as Horovod's own tests and examples use it, on several ranks under
hvdrun: autograd, the grouped and sparse operations, process sets, Adasum,
SyncBatchNorm, re-initialisation, the Timeline, hvd.run and horovodrun's flags."""

import os
import shutil
import subprocess
import sys

import pytest

STALL = {"HVD_STALL_CHECK_TIME": "10s", "HVD_STALL_SHUTDOWN_TIME": "30s"}


def ok(run_job, name, np=2, env=None, lines=None):
    code, out = run_job(name, np=np, env={**STALL, **(env or {})})
    assert code == 0, out
    for rank in range(np):
        assert f"rank {rank}: {lines or name.replace('_', ' ')} ok" in out, out


def test_every_collective_has_horovods_gradient(run_job):
    ok(run_job, "gradients")


def test_grouped_sparse_scaled_operations_and_their_errors(run_job):
    ok(run_job, "collectives")


def test_process_sets_take_global_roots_and_leave_outsiders_alone(run_job):
    ok(run_job, "process_sets", np=3)


@pytest.mark.parametrize("np", [2, 4])
def test_adasum_matches_the_pairwise_formula(run_job, np):
    ok(run_job, "adasum", np=np)


@pytest.mark.parametrize("backend", ["tcp", "shm"])
def test_adasum_runs_on_each_cpu_transport(run_job, backend):
    ok(run_job, "adasum", env={"HVD_BACKEND": backend})


def test_sync_batch_norm_matches_batch_norm_on_the_whole_batch(run_job):
    ok(run_job, "sync_batch_norm")


@pytest.mark.parametrize("backend", ["tcp", "shm"])
def test_init_after_shutdown_starts_a_new_job(run_job, backend):
    ok(run_job, "reinit", env={"HVD_BACKEND": backend})


def test_a_dynamic_timeline_is_started_by_the_program(run_job, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = run_job("timeline", env={"HOROVOD_TIMELINE": "DYNAMIC"},
                        args=[str(tmp_path)])
    assert code == 0, out
    assert "rank 1: timeline ok" in out, out
    assert not (tmp_path / "DYNAMIC").exists()


def test_hvd_run_returns_every_ranks_result():
    script = (
        "import hvd\n"
        "def work(base):\n"
        "    import hvd.torch as h\n"
        "    import torch\n"
        "    h.init()\n"
        "    return base + h.allreduce(torch.tensor([h.rank()]), op=h.Sum).item() * 10 + h.rank()\n"
        "print('results', hvd.run(work, args=(100,), np=2))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "results [110, 111]" in done.stdout, done.stdout + done.stderr


def test_hvd_run_refuses_what_it_cannot_do():
    import hvd

    with pytest.raises(TypeError, match="run\\(\\) got unexpected keyword arguments: "
                                        "min_nps"):
        hvd.run(print, np=2, min_nps=1)
    with pytest.raises(ValueError, match="start the program with mpirun instead"):
        hvd.run(print, np=2, use_mpi=True)


def test_horovodrun_takes_horovods_ci_command_line():
    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    if not os.access(horovodrun, os.X_OK):
        horovodrun = shutil.which("horovodrun")
    assert horovodrun, "horovodrun is not installed: install the hvd wheel"
    job = os.path.join(os.path.dirname(__file__), "jobs", "mismatch.py")
    done = subprocess.run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo",
                           "--stall-check-shutdown-time-seconds", "30", sys.executable, job],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 1: caught: Mismatched shapes" in done.stdout, done.stdout + done.stderr
    done = subprocess.run([horovodrun, "-np", "2", "--no-such-flag", sys.executable, job],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "unexpected argument '--no-such-flag' found" in done.stderr, done.stderr


def test_hvd_run_passes_horovods_elastic_arguments_to_hvdrun():
    from hvd.runner import _elastic_args

    assert _elastic_args({}) == []
    assert _elastic_args({"min_np": 2, "cooldown_range": (1, 5)}) == [
        "--elastic", "--blacklist-cooldown-range", "1", "5", "--min-np", "2"]
    assert _elastic_args({"host_discovery_script": "d.sh", "slots": 4}) == [
        "--host-discovery-script", "d.sh", "--slots-per-host", "4"]
