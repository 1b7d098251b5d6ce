"""hvd.torch's path for CUDA tensors, through the extension, against the GPU test double
(this machine has no GPU): device pointers in, results on the device out, the producer's
event waited for, and no copy between device and host in the call trace. torch's own
CUDA tensors need a GPU; the GPU bundle (cargo xtask gpu-check) runs those."""
import json
import os
import subprocess

import pytest


@pytest.fixture(scope="module")
def double():
    """The GPU test double's shared library, built by cargo (quick once built)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        built = subprocess.run(
            ["cargo", "build", "-p", "hvd-gpu-double", "--message-format=json"],
            cwd=root, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        built = None
    if built is None or built.returncode != 0:
        why = "cargo could not build hvd-gpu-double" + (
            f": {built.stderr[-2000:]}" if built is not None else " (no cargo on PATH)")
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    for line in built.stdout.splitlines():
        message = json.loads(line)
        for name in message.get("filenames") or []:
            if name.endswith("libhvd_gpu_double.so"):
                return name
    pytest.fail("cargo built hvd-gpu-double but named no libhvd_gpu_double.so")


def marked(trace, pid, start="start"):
    """The functions process `pid` called between its mark `start` and its next mark."""
    calls, inside = [], False
    with open(trace) as lines:
        for line in lines:
            words = line.split()
            if len(words) < 2 or words[0] != str(pid):
                continue
            if words[1] == "mark":
                inside = words[2] == start
                continue
            if inside:
                calls.append(words[1])
    return calls


def run_device_job(run_job, double, tmp_path, env=None):
    trace = tmp_path / "trace"
    code, out = run_job("device", env={
        "HVD_CUDA_LIBRARY": double, "HVD_NCCL_LIBRARY": double,
        "HVD_GPU_DOUBLE_TRACE": str(trace),
        # Streams run their work only once something waits for it: a collective that
        # skips the producer's event reads the bytes before the producer's copy.
        "HVD_GPU_DOUBLE_LAZY": "1", **(env or {})})
    assert code == 0, out
    for rank in (0, 1):
        assert f"rank {rank}: device ok" in out, out
    pids = {line.split()[0] for line in open(trace) if line.split()[1:2] == ["mark"]}
    assert len(pids) == 2, pids
    return out, [marked(str(trace), pid) for pid in pids], \
        [marked(str(trace), pid, "into.start") for pid in pids]


def test_cuda_tensors_go_to_nccl_by_device_pointer(run_job, double, tmp_path):
    out, ranks, into = run_device_job(run_job, double, tmp_path)
    assert "rank 0: path nccl: by device pointer over nccl" in out, out
    for calls in ranks:
        host_copies = [c for c in calls if c.startswith(("cuMemcpyDtoH", "cuMemcpyHtoD"))]
        assert host_copies == [], host_copies
        # The producer's event, waited for on the device, not by the host.
        assert "cuStreamWaitEvent" in calls and "cuEventSynchronize" not in calls, calls
        assert {"ncclAllReduce", "ncclBroadcast", "ncclReduceScatter"} <= set(calls), calls
    for calls in into:
        # Out of place: NCCL reads the input and writes the output, no copy between them.
        assert "ncclAllReduce" in calls, calls
        copies = [c for c in calls if c.startswith("cuMemcpy")]
        assert copies == [], copies


def test_two_ranks_sharing_one_gpu(run_job, double, tmp_path):
    out, _, _ = run_device_job(run_job, double, tmp_path, {"HVD_GPU_DOUBLE_DEVICES": "1"})
    assert "rank 1: path nccl" in out, out


def test_a_host_transport_named_stages_cuda_tensors_in_the_runtime(run_job, double, tmp_path):
    out, ranks, into = run_device_job(run_job, double, tmp_path, {"HVD_BACKEND": "shm"})
    why = ("by device pointer, staged through host memory by hvd's runtime over shm (the "
           "job has no NCCL communicator: HVD_BACKEND=shm)")
    assert f"rank 0: path staged: {why}" in out, out
    # Logged once per job, as a warning: the job runs far below NCCL's speed.
    assert out.count(f"rank 1: CUDA tensors go {why}") == 1, out
    for calls in ranks:
        assert "ncclAllReduce" not in calls, calls
        assert any(c.startswith("cuMemcpyDtoH") for c in calls), calls
    for calls in into:
        # Out of place: the input copied down once, the result up into the output once.
        copies = [c for c in calls if c.startswith("cuMemcpy")]
        assert [c for c in copies if c.startswith("cuMemcpyDtoD")] == [], copies
        assert len([c for c in copies if c.startswith("cuMemcpyDtoH")]) == 1, copies
        assert len([c for c in copies if c.startswith("cuMemcpyHtoD")]) == 1, copies
