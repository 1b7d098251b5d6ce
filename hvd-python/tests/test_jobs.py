"""Multi-process jobs under hvdrun, each checking its own results on every rank."""

import os
import shutil
import subprocess
import sys


def test_every_op_and_dtype_matches_local_values(run_job):
    code, out = run_job("ops")
    assert code == 0, out
    assert "rank 0: ops ok" in out and "rank 1: ops ok" in out, out


def test_ops_over_tcp(run_job):
    code, out = run_job("ops", env={"HVD_BACKEND": "tcp"})
    assert code == 0, out
    assert "rank 1: ops ok" in out, out


def test_optimizer_matches_one_rank_with_accumulation_and_unused_parameters(run_job):
    code, out = run_job("optimizer")
    assert code == 0, out
    for rank in (0, 1):
        assert f"rank {rank}: backward_passes_per_step=1 matches one rank" in out, out
        assert f"rank {rank}: backward_passes_per_step=3 matches one rank" in out, out
        assert f"rank {rank}: extra backward refused" in out, out
        assert f"rank {rank}: optimizer ok" in out, out


def test_mismatched_shapes_name_both_ranks_on_every_rank(run_job):
    code, out = run_job("mismatch")
    assert code == 0, out
    message = "Mismatched shapes for tensor 'grad.w': rank 0 has [2], rank 1 has [3]"
    assert f"rank 0: caught: {message}" in out, out
    assert f"rank 1: caught: {message}" in out, out


def test_survivor_names_the_killed_rank(run_job):
    code, out = run_job("killed")
    assert code == 0, out
    assert "rank 0: caught RankLostError: rank 0: lost rank 1" in out, out


def test_horovodrun_alias_takes_np_and_hosts():
    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    if not os.access(horovodrun, os.X_OK):
        horovodrun = shutil.which("horovodrun")
    assert horovodrun, "horovodrun is not installed: install the hvd wheel"
    job = os.path.join(os.path.dirname(__file__), "jobs", "mismatch.py")
    done = subprocess.run([horovodrun, "-np", "2", "-H", "localhost:2", sys.executable, job],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 1: caught: Mismatched shapes" in done.stdout, done.stdout + done.stderr


def test_a_rank_whose_data_is_slow_is_named_in_every_epochs_report(run_job, tmp_path):
    code, out = run_job("data_stall", np=3, args=[str(tmp_path)])
    assert code == 0, out
    for rank in range(3):
        assert f"rank {rank}: data_stall ok" in out, out
    # Rank 0's line, logged as a warning: far more than 5 % of the epoch is lost.
    assert "data-bound" in out and "rank 2 waited for data" in out, out


def test_threads_that_call_init_at_once_share_one_job(run_job):
    code, out = run_job("init_threads")
    assert code == 0, out
    assert "rank 0: init from 4 threads ok" in out and "rank 1: init from 4 threads ok" in out, out


def test_the_native_data_loader_gives_every_sample_once_as_tensors_of_its_own_buffers(run_job):
    code, out = run_job("data_loader")
    assert code == 0, out
    assert "rank 0: data loader ok" in out and "rank 1: data loader ok" in out, out
