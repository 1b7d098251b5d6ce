//! The simulated cluster `cargo xtask test-cluster` builds (hosts as network namespaces,
//! see `xtask/src/cluster.rs`), as its description file tells the tests: the hosts, how
//! to log in to them, and how to reshape or cut their links.

use std::net::Ipv4Addr;
use std::process::Command;

pub struct Host {
    pub namespace: String,
    pub address: Ipv4Addr,
    /// Its link's end on the bridge, in the launcher's namespace.
    pub switch_port: String,
}

pub struct Cluster {
    pub ranks_per_host: usize,
    pub link: String,
    /// hvdrun's options that reach the hosts (login key, interfaces), as xtask says.
    hvdrun_args: Vec<String>,
    pub hosts: Vec<Host>,
}

/// Where the description is; set by `cargo xtask test-cluster`.
const DESCRIPTION: &str = "HVD_TEST_CLUSTER";

impl Cluster {
    /// The cluster of this test run. The tests that call it are ignored unless xtask
    /// runs them with the cluster up, so a missing description is a failure.
    pub fn from_env() -> Cluster {
        let path = std::env::var(DESCRIPTION).unwrap_or_else(|_| {
            panic!("{DESCRIPTION} is not set: run cargo xtask test-cluster as root")
        });
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut cluster = Cluster {
            ranks_per_host: 1,
            link: String::new(),
            hvdrun_args: Vec::new(),
            hosts: Vec::new(),
        };
        for line in text.lines() {
            if let Some(arg) = line.strip_prefix("hvdrun_arg ") {
                cluster.hvdrun_args.push(arg.into());
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields[..] {
                ["ranks_per_host", n] => cluster.ranks_per_host = n.parse().unwrap(),
                ["link", rate] => cluster.link = rate.into(),
                ["host", ns, address, port] => cluster.hosts.push(Host {
                    namespace: ns.into(),
                    address: address.parse().unwrap(),
                    switch_port: port.into(),
                }),
                _ => panic!("{path}: unexpected line {line:?}"),
            }
        }
        assert!(!cluster.hosts.is_empty(), "{path} lists no host");
        cluster
    }

    /// `-H` for `slots` ranks on each of the first `count` hosts.
    pub fn hosts_arg(&self, count: usize, slots: usize) -> String {
        self.hosts[..count]
            .iter()
            .map(|h| format!("{}:{slots}", h.address))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// hvdrun with the options that reach the hosts: the login key, and each host's
    /// interface on the cluster network.
    pub fn hvdrun(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.args(&self.hvdrun_args).env_remove("RUST_LOG");
        command
    }

    /// The last host, whose link a test may cut or slow: restored when the test ends.
    pub fn last_host(&self) -> Restore<'_> {
        assert!(self.hosts.len() >= 2, "the scenario needs two hosts");
        Restore {
            host: &self.hosts[self.hosts.len() - 1],
            rate: self.link.clone(),
        }
    }
}

fn tc(namespace: Option<&str>, dev: &str, rate: &str) {
    let mut command = Command::new("tc");
    if let Some(ns) = namespace {
        command.args(["-n", ns]);
    }
    let status = command
        .args(["qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate])
        .args(["burst", "1mb", "latency", "100ms"])
        .status()
        .unwrap();
    assert!(status.success(), "tc on {dev}");
}

fn link(dev: &str, state: &str) {
    let status = Command::new("ip")
        .args(["link", "set", dev, state])
        .status()
        .unwrap();
    assert!(status.success(), "ip link set {dev} {state}");
}

impl Host {
    /// Shapes both directions of this host's link to `rate`.
    pub fn shape(&self, rate: &str) {
        tc(Some(&self.namespace), "hvdnet", rate);
        tc(None, &self.switch_port, rate);
    }

    /// Cuts this host's link (`false`) or restores it.
    pub fn set_link(&self, up: bool) {
        link(&self.switch_port, if up { "up" } else { "down" });
    }
}

/// Restores a host's link and rate when a test ends, also by a failed assertion.
pub struct Restore<'a> {
    pub host: &'a Host,
    pub rate: String,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.host.set_link(true);
        self.host.shape(&self.rate);
    }
}
