"""Elastic PyTorch jobs under horovodrun, on two "hosts" of this machine (localhost and
127.0.0.1) and on the simulated cluster of `cargo xtask test-cluster` (4 hosts of 2 slots
in network namespaces, reached over ssh): a host killed inside optimizer.synchronize, a
host added and one removed by the discovery script. Each checks the outcome, every
example exactly once per epoch, the weights of the same job in one process
(jobs/elastic_train.py) and that no worker is left."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import installed

JOBS = os.path.join(os.path.dirname(__file__), "jobs")
sys.path.insert(0, JOBS)
import elastic_train  # noqa: E402


def horovodrun():
    return installed("horovodrun")


class Hosts:
    """Where a job runs: host names (two slots each) and the launcher options that reach
    them."""

    def __init__(self, names, launcher_args=(), namespaces=()):
        self.names = list(names)
        self.launcher_args = list(launcher_args)
        self.namespaces = list(namespaces)

    def listed(self, names):
        return [f"{name}:2" for name in names]


def simulated_cluster():
    """The hosts of the simulated cluster `cargo xtask test-cluster` builds, from the
    description it names in HVD_TEST_CLUSTER (see hvdrun/tests/common/cluster.rs)."""
    path = os.environ.get("HVD_TEST_CLUSTER")
    if not path:
        pytest.skip("needs the simulated cluster: cargo xtask test-cluster runs it (as root)")
    names, args, namespaces = [], [], []
    with open(path) as f:
        for line in f.read().splitlines():
            if line.startswith("hvdrun_arg "):
                args.append(line[len("hvdrun_arg "):])
            elif line.startswith("host "):
                _, namespace, address, _ = line.split()
                names.append(address)
                namespaces.append(namespace)
    return Hosts(names, args, namespaces)


@pytest.fixture(params=["local", "cluster"])
def hosts(request):
    """Two hosts of this machine (localhost and 127.0.0.1), or the simulated cluster
    (`pytest -k cluster` with HVD_TEST_CLUSTER set, as xtask runs it)."""
    if request.param == "local":
        return Hosts(["localhost", "127.0.0.1"])
    return simulated_cluster()


def run(hosts, out, launcher_args, fault="", step_ms=0):
    command = [horovodrun(), *hosts.launcher_args, *launcher_args,
               "-x", f"ELASTIC_OUT={out}", "-x", f"ELASTIC_FAULT={fault}",
               "-x", f"ELASTIC_STEP_MS={step_ms}", "-x", "HVD_TIMEOUT=5",
               sys.executable, os.path.join(JOBS, "elastic_train.py")]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    print(f"MEASURED {len(hosts.names)} hosts, {' '.join(launcher_args[:1])}: "
          f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    return done


def check(hosts, out, done):
    """The outcome: exit 0, every example once per epoch, the weights of one process,
    and no worker left on any host."""
    assert done.returncode == 0, done.stdout + done.stderr
    assert_no_worker_left(hosts, out)
    with open(os.path.join(out, "final.json")) as f:
        final = json.load(f)
    log = final["log"]
    for epoch in range(elastic_train.EPOCHS):
        part = log[epoch * elastic_train.EXAMPLES:(epoch + 1) * elastic_train.EXAMPLES]
        assert sorted(part) == list(range(elastic_train.EXAMPLES)), f"epoch {epoch}"
    assert len(log) == elastic_train.EPOCHS * elastic_train.EXAMPLES
    for got, want in zip(final["w"], elastic_train.reference()):
        assert abs(got - want) <= 1e-5 * abs(want), (got, want)
    return final


def job_pids(out):
    """The processes of this machine that run the job writing into `out` (every
    simulated host is a namespace of it)."""
    mine = f"ELASTIC_OUT={out}".encode()
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mine in f.read().split(b"\0"):
                    pids.append(pid)
        except OSError:
            pass
    return pids


def assert_no_worker_left(hosts, out):
    deadline = time.time() + 10
    while job_pids(out):
        assert time.time() < deadline, f"workers left behind: pids {job_pids(out)}"
        time.sleep(0.2)


def lines(out, name):
    path = os.path.join(out, name)
    return open(path).read().splitlines() if os.path.exists(path) else []


def round_sizes(out):
    return [int(line.split()[0]) for line in lines(out, "rounds")]


def reset_sizes(out):
    return [int(line.split()[0]) for line in lines(out, "resets")]


def test_a_host_lost_inside_synchronize_leaves_no_stale_handle(tmp_path, hosts):
    out = str(tmp_path)
    victim = hosts.names[-1]
    everyone = 2 * len(hosts.names)
    done = run(hosts, out, ["--elastic", "-H", ",".join(hosts.listed(hosts.names)),
                            "--min-np", "2"], fault=f"kill-host:{victim}:5")
    check(hosts, out, done)
    sizes = round_sizes(out)
    assert sizes.count(everyone) == everyone and everyone - 2 in sizes, sizes
    assert "round 1 failed: rank " in done.stderr, done.stderr
    assert f"on host {victim} failed first (killed by signal 9)" in done.stderr, done.stderr
    assert done.stderr.count(" is kept out for ") == 1, done.stderr
    # Each survivor's reset callback ran once, in the smaller round, and no worker's
    # before its first round.
    assert reset_sizes(out) == [everyone - 2] * (everyone - 2), lines(out, "resets")
    # The survivors failed inside synchronize and went on: no assertion about pending
    # handles (zero_grad before step) in the next round.
    assert "zero_grad() was called after loss.backward()" not in done.stderr


def discovery(tmp_path, hosts):
    listing = tmp_path / "hosts"
    listing.write_text("\n".join(hosts) + "\n")
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {listing}\n")
    script.chmod(0o755)
    return str(script), listing


def change_when_training(out, listing, hosts):
    def change():
        deadline = time.time() + 60
        while not lines(out, "rounds") and time.time() < deadline:
            time.sleep(0.02)
        listing.write_text("\n".join(hosts) + "\n")
    thread = threading.Thread(target=change)
    thread.start()
    return thread


def steps_of_first_host(out, hosts):
    """Steps each worker of the first host executed: the host that stays throughout."""
    first = hosts.names[0]
    return [int(w.split()[-1]) for w in lines(out, "workers") if w.split()[0] == first]


def test_a_discovered_host_joins_and_nothing_is_rolled_back(tmp_path, hosts):
    out = str(tmp_path)
    script, listing = discovery(tmp_path, hosts.listed(hosts.names[:-1]))
    changer = change_when_training(out, listing, hosts.listed(hosts.names))
    done = run(hosts, out, ["--host-discovery-script", script, "--min-np", "2"],
               step_ms=60)
    changer.join()
    final = check(hosts, out, done)
    everyone = 2 * len(hosts.names)
    assert set(round_sizes(out)) == {everyone - 2, everyone}, round_sizes(out)
    assert reset_sizes(out) == [everyone] * (everyone - 2), lines(out, "resets")
    assert steps_of_first_host(out, hosts) == [final["steps"]] * 2
    assert "kept out" not in done.stderr, done.stderr


def test_a_host_removed_by_discovery_exits_0_at_the_next_commit(tmp_path, hosts):
    out = str(tmp_path)
    script, listing = discovery(tmp_path, hosts.listed(hosts.names))
    changer = change_when_training(out, listing, hosts.listed(hosts.names[:-1]))
    done = run(hosts, out, ["--host-discovery-script", script, "--min-np", "2"],
               step_ms=60)
    changer.join()
    final = check(hosts, out, done)
    removed = [w for w in lines(out, "workers") if w.split()[0] == hosts.names[-1]]
    assert len(removed) == 2 and all(" removed " in w for w in removed), removed
    everyone = 2 * len(hosts.names)
    assert reset_sizes(out) == [everyone - 2] * (everyone - 2), lines(out, "resets")
    assert "kept out" not in done.stderr, done.stderr
    assert steps_of_first_host(out, hosts) == [final["steps"]] * 2


def test_a_mismatch_is_a_bug_the_job_ends_with(tmp_path, run_job):
    code, output = run_job("elastic_mismatch", launcher_args=["--elastic", "--min-np", "2"])
    assert code == 1, output
    assert "failed with an error no new round can cure, which ends the job: MismatchError: " \
        "Mismatched shapes for tensor 'grad': rank 0 has [1], rank 1 has [2]" in output, output
    assert "round 2" not in output, output
