//! hvd across the simulated cluster of `cargo xtask test-cluster`: hosts with network
//! stacks of their own behind bandwidth-limited links, reached by hvdrun over ssh. The
//! conformance suite through every transport that crosses hosts, the runtime, and
//! faults: a host's ranks killed, a link cut mid-allreduce, a host without sshd, a slow
//! link. Every test is ignored in a plain test run (there is no cluster); xtask runs
//! them one at a time with the cluster up, since some reshape or cut its links.

#[path = "common/cluster.rs"]
mod cluster;

use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use cluster::Cluster;
use hvd::ReduceOp;

const HVDRUN: &str = env!("CARGO_BIN_EXE_hvdrun");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// This binary's `cluster_rank` in `scenario`, as the command of every rank.
fn rank_command(scenario: &str) -> Vec<String> {
    let mut args = vec!["-x".to_string(), format!("HVD_TEST_SCENARIO={scenario}")];
    args.push("--".into());
    args.push(std::env::current_exe().unwrap().display().to_string());
    args.extend(
        [
            "cluster_rank",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ]
        .map(String::from),
    );
    args
}

/// Runs `np` ranks of `scenario` on the `-H` list `hosts`, with `vars` set on every rank.
fn job(cluster: &Cluster, np: usize, hosts: &str, scenario: &str, vars: &[&str]) -> Output {
    let mut command = cluster.hvdrun(HVDRUN);
    command.args(["-np", &np.to_string(), "-H", hosts]);
    for var in ["HVD_TCP_TIMEOUT=20"].iter().chain(vars) {
        command.args(["-x", var]);
    }
    command.args(rank_command(scenario)).output().unwrap()
}

/// The lines ranks printed after `tag `, sorted.
fn tagged(out: &Output, tag: &str) -> Vec<String> {
    let mut lines: Vec<String> = text(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_once(&format!("{tag} "))
                .map(|(_, rest)| rest.to_string())
        })
        .collect();
    lines.sort();
    lines
}

#[test]
#[ignore = "one rank of a job launched by the other tests of this file"]
fn cluster_rank() {
    let scenario = std::env::var("HVD_TEST_SCENARIO").unwrap();
    // After libtest's "test cluster_rank ... ", on a line of its own.
    println!();
    if scenario == "conformance" {
        let world = hvd::World::from_env().unwrap();
        let backend = hvd::Backend::from_env().unwrap();
        let group = hvd::transport::connect(backend, &world).unwrap();
        let options = hvd::core::conformance::Options::quick();
        match hvd::core::conformance::run_rank(group.as_ref(), &options) {
            Ok(report) => println!("CONFORMANCE {} passed via {}", report.rank, group.backend()),
            Err(failure) => panic!("FAILED {failure}"),
        }
        return;
    }
    let hvd = hvd::init().unwrap();
    let rank = hvd.rank();
    match scenario.as_str() {
        "runtime" => {
            // Names submitted in different orders, fused; then a mismatch.
            let mut names: Vec<String> = (0..20).map(|i| format!("grad.{i}")).collect();
            if rank % 2 == 1 {
                names.reverse();
            }
            let handles: Vec<_> = names
                .iter()
                .map(|n| {
                    hvd.allreduce_async(n, vec![1.0f32; 5000], ReduceOp::Sum)
                        .unwrap()
                })
                .collect();
            let sums: Vec<f32> = handles.into_iter().map(|h| h.wait().unwrap()[0]).collect();
            let all_same = sums.iter().all(|s| *s == hvd.size() as f32);
            let mismatch = hvd
                .allreduce("grad.w", vec![0u8; 1 + rank % 2], ReduceOp::Sum)
                .unwrap_err();
            println!(
                "RUNTIME {rank} of {} sums {all_same} via {} | {mismatch}",
                hvd.size(),
                hvd.transport()
            );
        }
        "kill-host" => {
            let warmup = hvd.allreduce("warmup", vec![1u8], ReduceOp::Sum);
            if hvd.cross_rank() + 1 == hvd.cross_size() {
                // The last host's ranks all go at once, as when a machine fails.
                // SAFETY: raise(3) has no memory-safety preconditions.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            // A rank still finishing the warmup when they go fails there.
            let err = match warmup {
                Err(e) => e,
                Ok(_) => loop {
                    if let Err(e) = hvd.allreduce("grad", vec![1.0f32; 1 << 18], ReduceOp::Sum) {
                        break e;
                    }
                },
            };
            println!("SURVIVOR {rank}: {err}");
            std::process::exit(1);
        }
        "loop" => {
            hvd.allreduce("warmup", vec![1u8], ReduceOp::Sum).unwrap();
            println!("LOOPING {rank}");
            let err = loop {
                if let Err(e) = hvd.allreduce("grad", vec![1.0f32; 1 << 18], ReduceOp::Sum) {
                    break e;
                }
            };
            println!("FAILED {rank}: {err}");
            std::process::exit(1);
        }
        "bandwidth" => {
            hvd.allreduce("warmup", vec![1u8], ReduceOp::Sum).unwrap();
            let start = Instant::now();
            let mut right = true;
            for _ in 0..2 {
                let out = hvd
                    .allreduce("grad", vec![1.0f32; 1 << 20], ReduceOp::Sum)
                    .unwrap();
                right &= out.iter().all(|x| *x == hvd.size() as f32);
            }
            println!(
                "BANDWIDTH {rank} {right} {:.3}",
                start.elapsed().as_secs_f64()
            );
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn the_conformance_suite_passes_across_hosts_through_every_transport() {
    let cluster = Cluster::from_env();
    let (hosts, per_host) = (cluster.hosts.len(), cluster.ranks_per_host);
    let np = hosts * per_host;
    let every_host = cluster.hosts_arg(hosts, per_host);
    let mut runs = vec![
        ("hierarchical", vec!["HVD_HIERARCHICAL_ALLREDUCE=1"]),
        ("tcp", vec!["HVD_HIERARCHICAL_ALLREDUCE=0"]),
    ];
    if cfg!(feature = "rdma") {
        runs.push((
            "rdma",
            vec!["HVD_BACKEND=rdma", "HVD_RDMA_PROVIDER=tcp;ofi_rxm"],
        ));
    }
    for (via, vars) in runs {
        let out = job(&cluster, np, &every_host, "conformance", &vars);
        assert!(out.status.success(), "{via}: {}", text(&out.stderr));
        let expected: Vec<String> = {
            let mut e: Vec<String> = (0..np).map(|r| format!("{r} passed via {via}")).collect();
            e.sort();
            e
        };
        assert_eq!(tagged(&out, "CONFORMANCE"), expected, "{via}");
    }
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn the_runtime_negotiates_and_fuses_across_hosts() {
    let cluster = Cluster::from_env();
    let (hosts, per_host) = (cluster.hosts.len(), cluster.ranks_per_host);
    let np = hosts * per_host;
    let out = job(
        &cluster,
        np,
        &cluster.hosts_arg(hosts, per_host),
        "runtime",
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let via = if hosts > 1 && per_host > 1 {
        "hierarchical"
    } else {
        "tcp"
    };
    let lines = tagged(&out, "RUNTIME");
    assert_eq!(lines.len(), np, "{lines:?}");
    for line in &lines {
        assert!(
            line.ends_with(&format!(
                "of {np} sums true via {via} | Mismatched shapes for tensor 'grad.w': rank 0 has [1], rank 1 has [2]"
            )),
            "{line}"
        );
    }
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_hosts_ranks_killed_are_named_by_every_survivor_and_hvdrun() {
    let cluster = Cluster::from_env();
    let (hosts, per_host) = (cluster.hosts.len(), cluster.ranks_per_host);
    assert!(hosts >= 2, "the scenario needs two hosts");
    let np = hosts * per_host;
    let started = Instant::now();
    let out = job(
        &cluster,
        np,
        &cluster.hosts_arg(hosts, per_host),
        "kill-host",
        // Over TCP alone: within a host, a survivor's shared-memory group cannot yet
        // carry a loss from across hosts, so a neighbour that exits on its error is
        // named instead of the killed host (see the book's development chapter).
        &["HVD_TCP_TIMEOUT=10", "HVD_HIERARCHICAL_ALLREDUCE=0"],
    );
    let stderr = text(&out.stderr);
    // The last host's ranks were killed; hvdrun names one of them, not a survivor.
    let dead: Vec<usize> = ((hosts - 1) * per_host..np).collect();
    let address = cluster.hosts[hosts - 1].address;
    let named = dead.iter().any(|r| {
        stderr.contains(&format!(
            "hvdrun: rank {r} on {address} failed first (killed by signal 9)"
        ))
    });
    assert!(named, "{stderr}");
    let survivors = tagged(&out, "SURVIVOR");
    assert_eq!(survivors.len(), np - per_host, "{survivors:?}\n{stderr}");
    for line in &survivors {
        assert!(
            dead.iter()
                .any(|r| line.contains(&format!("lost rank {r}"))),
            "{line}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_link_cut_mid_allreduce_is_reported_by_every_rank_and_hvdrun() {
    let cluster = Cluster::from_env();
    let hosts = cluster.hosts.len();
    let cut = cluster.last_host();
    // One rank per host, so that the cut host's rank is `hosts - 1`.
    let mut command = cluster.hvdrun(HVDRUN);
    command
        .args([
            "-np",
            &hosts.to_string(),
            "-H",
            &cluster.hosts_arg(hosts, 1),
        ])
        .args(["-x", "HVD_TCP_TIMEOUT=5"])
        .args(rank_command("loop"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut lines = stdout.lines().map_while(Result::ok);
    let mut looping = 0;
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        seen.push(line.clone());
        if line.contains("LOOPING ") {
            looping += 1;
            if looping == hosts {
                break;
            }
        }
    }
    assert_eq!(looping, hosts, "{seen:?}");
    std::thread::sleep(Duration::from_millis(300));
    let cut_at = Instant::now();
    cut.host.set_link(false);
    let rest: Vec<String> = lines.collect();
    let status = child.wait().unwrap();
    let elapsed = cut_at.elapsed();
    let stderr = stderr.join().unwrap();
    assert!(!status.success());
    let lost = hosts - 1;
    // Every rank still reachable names the rank behind the cut link.
    let failed: Vec<&String> = rest.iter().filter(|l| l.contains("FAILED ")).collect();
    for rank in 0..lost {
        let line = failed
            .iter()
            .find(|l| l.contains(&format!("FAILED {rank}: ")))
            .unwrap_or_else(|| panic!("rank {rank} said nothing: {rest:?}\n{stderr}"));
        assert!(line.contains(&format!("rank {lost}")), "{line}");
    }
    // hvdrun cannot tell a cut link from a frozen rank; it names the one behind it.
    let survivors: Vec<String> = (0..lost).map(|r| r.to_string()).collect();
    let (noun, verb) = if lost == 1 {
        ("rank", "it")
    } else {
        ("ranks", "they")
    };
    assert!(
        stderr.contains(&format!(
            "hvdrun: rank {lost} on {} failed first (still running when its peers lost it: \
             frozen, stopped, stuck or cut off from them?); {noun} {} failed because {verb} \
             lost rank {lost}.",
            cut.host.address,
            survivors.join(", ")
        )),
        "{stderr}"
    );
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_host_without_sshd_is_named_by_hvdrun() {
    let cluster = Cluster::from_env();
    let host = &cluster.hosts[cluster.hosts.len() - 1];
    // The host is up, but nothing listens on the ssh port asked for.
    let out = cluster
        .hvdrun(HVDRUN)
        .args([
            "-p",
            "2222",
            "-np",
            "1",
            "-H",
            &format!("{}:1", host.address),
            "true",
        ])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "hvdrun: rank 0 failed first (exit code 255: ssh failed (host unreachable, login refused, or the rank exited 255)). Last lines of its stderr:\n    ssh: connect to host {} port 2222: Connection refused",
            host.address
        )),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn a_slow_link_slows_the_job_to_its_rate_and_keeps_results_right() {
    let cluster = Cluster::from_env();
    let hosts = cluster.hosts.len();
    let slow = cluster.last_host();
    let run = || {
        let out = job(
            &cluster,
            hosts,
            &cluster.hosts_arg(hosts, 1),
            "bandwidth",
            &["HVD_HIERARCHICAL_ALLREDUCE=0"],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let lines = tagged(&out, "BANDWIDTH");
        assert_eq!(lines.len(), hosts, "{lines:?}");
        lines
            .iter()
            .map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                assert_eq!(fields[1], "true", "wrong sums: {l}");
                fields[2].parse::<f64>().unwrap()
            })
            .fold(0.0, f64::max)
    };
    let fast = run();
    slow.host.shape("40mbit");
    let slowed = run();
    // Two ring allreduces of 4 MiB: each sends 2 (n-1)/n of the tensor through every
    // rank's link, the slow one too; at 40 Mbit/s that takes at least this long.
    let n = hosts as f64;
    let bits = 2.0 * 2.0 * (n - 1.0) / n * 4.0 * 1048576.0 * 8.0;
    let floor = bits / 40e6;
    assert!(
        slowed > 0.8 * floor && slowed > 3.0 * fast,
        "slow link: {slowed:.3}s, floor {floor:.3}s, full rate {fast:.3}s"
    );
}

#[test]
#[ignore = "needs the simulated cluster: cargo xtask test-cluster runs it (as root)"]
fn every_host_is_its_own_network() {
    // Guards the rest: each host has its own address and sees only its own interfaces.
    let cluster = Cluster::from_env();
    for host in &cluster.hosts {
        let out = std::process::Command::new("ip")
            .args(["-n", &host.namespace, "-o", "-4", "addr", "show"])
            .output()
            .unwrap();
        let addrs = text(&out.stdout);
        assert!(
            addrs.contains(&format!("hvdnet    inet {}/24", host.address)),
            "{addrs}"
        );
        assert_eq!(addrs.lines().count(), 2, "lo and its link only: {addrs}");
    }
}
