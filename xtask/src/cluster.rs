//! A simulated cluster on this machine: hosts as network namespaces, each with its own
//! network stack, an sshd and one link to a bridge (the switch), the link shaped with
//! `tc` to a bandwidth in both directions. The tests of `hvdrun/tests/cluster.rs` read its
//! description from the file named by `HVD_TEST_CLUSTER`.
//!
//! Everything it makes is named `hvdc...`, and removed when the [`Cluster`] is dropped, or
//! by the next run when a previous one was killed before it could clean up.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BRIDGE: &str = "hvdcbr";
/// The interface of every host on its link: one name, so that `--network-interface
/// hvdcbr,hvdnet` serves the launcher's host and every simulated one.
pub const HOST_IFACE: &str = "hvdnet";
const NAMESPACE_PREFIX: &str = "hvdc-h";
const SSHD: &str = "/usr/sbin/sshd";

/// What to build.
#[derive(Debug, Clone)]
pub struct Spec {
    pub hosts: usize,
    pub ranks_per_host: usize,
    /// A `tc` rate such as `10gbit` or `500mbit`.
    pub link: String,
}

/// One simulated host.
#[derive(Debug)]
pub struct Host {
    pub namespace: String,
    pub address: Ipv4Addr,
    /// Its link's end on the bridge, in this namespace.
    pub switch_port: String,
    sshd: Option<Child>,
}

/// A running cluster; dropping it tears everything down.
#[derive(Debug)]
pub struct Cluster {
    pub spec: Spec,
    pub hosts: Vec<Host>,
    pub dir: PathBuf,
    pub description: PathBuf,
    /// Held while the cluster is up: the network names are fixed, so a second cluster
    /// would tear this one down.
    _lock: std::fs::File,
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args).map(drop)
}

/// Why this machine cannot host the cluster, if it cannot.
pub fn unavailable() -> Option<String> {
    if !crate::requirements::is_root() {
        return Some("it needs root (network namespaces, bridges, tc)".into());
    }
    for (tool, package) in [
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("ssh", "openssh-client"),
    ] {
        if run("which", &[tool]).is_err() {
            return Some(format!("{tool} is missing (apt-get install {package})"));
        }
    }
    if !Path::new(SSHD).exists() {
        return Some("sshd is missing (apt-get install openssh-server)".into());
    }
    if let Err(why) = ip(&["netns", "list"]) {
        return Some(format!("network namespaces do not work here: {why}"));
    }
    None
}

/// Sets the bandwidth of a link direction: the egress of `dev` (in `namespace`, or here).
pub fn shape(namespace: Option<&str>, dev: &str, rate: &str) -> Result<(), String> {
    let mut args: Vec<&str> = Vec::new();
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    // A bucket of a few milliseconds at the rate: bursts no bigger than a real NIC's
    // queue lets through, and enough for TSO segments at 10 Gbit/s.
    args.extend([
        "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", "1mb", "latency",
        "100ms",
    ]);
    run("tc", &args).map(drop)
}

/// Removes whatever an earlier run left behind: processes in its namespaces, the
/// namespaces, their links and the bridge.
pub fn remove_leftovers() {
    let listed = run("ip", &["netns", "list"]).unwrap_or_default();
    for ns in listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(NAMESPACE_PREFIX))
    {
        remove_namespace(ns);
    }
    let links = run("ip", &["-o", "link", "show"]).unwrap_or_default();
    for link in links
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n))
        .filter(|n| n.starts_with("hvdcv") || *n == BRIDGE)
    {
        let _ = ip(&["link", "del", link]);
    }
}

/// Kills every process in `ns` (an sshd, ranks a killed test left), then deletes it.
fn remove_namespace(ns: &str) {
    let pids = run("ip", &["netns", "pids", ns]).unwrap_or_default();
    for pid in pids.split_whitespace() {
        let _ = run("kill", &["-9", pid]);
    }
    let _ = ip(&["netns", "del", ns]);
}

/// The machine-wide lock on the simulated cluster, or who holds it: a second cluster
/// would reuse the same namespaces, bridge and addresses, and its start removes the
/// first's as leftovers.
fn exclusive() -> Result<std::fs::File, String> {
    exclusive_at(&std::env::temp_dir().join("hvd-cluster.lock"))
}

fn exclusive_at(path: &Path) -> Result<std::fs::File, String> {
    use std::fs::TryLockError;
    use std::io::{Read, Seek, Write};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Err(format!(
                "another simulated cluster is up (process {}, lock {}): two cannot share \
                 its network names; wait for that test-cluster to end",
                holder.trim(),
                path.display()
            ));
        }
        Err(TryLockError::Error(e)) => return Err(format!("{}: {e}", path.display())),
    }
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    Ok(file)
}

fn keygen(path: &Path) -> Result<(), String> {
    let path = path.to_str().ok_or("non-UTF-8 path")?;
    run("ssh-keygen", &["-q", "-t", "ed25519", "-N", "", "-f", path]).map(drop)
}

impl Cluster {
    /// Builds the cluster; on any failure, removes what was made and says what failed.
    pub fn create(spec: Spec) -> Result<Cluster, String> {
        if spec.hosts == 0 || spec.hosts > 200 {
            return Err(format!("--hosts takes 1 to 200 hosts, got {}", spec.hosts));
        }
        if spec.ranks_per_host == 0 {
            return Err("--ranks-per-host must be at least 1".into());
        }
        let lock = exclusive()?;
        remove_leftovers();
        let dir = std::env::temp_dir().join(format!("hvd-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cluster = Cluster {
            description: dir.join("cluster.txt"),
            dir,
            hosts: Vec::new(),
            spec,
            _lock: lock,
        };
        cluster.build()?;
        Ok(cluster)
    }

    fn build(&mut self) -> Result<(), String> {
        ip(&["link", "add", BRIDGE, "type", "bridge"])?;
        ip(&["addr", "add", "10.232.0.1/24", "dev", BRIDGE])?;
        ip(&["link", "set", BRIDGE, "up"])?;
        let login = self.dir.join("login_key");
        let host_key = self.dir.join("host_key");
        keygen(&login)?;
        keygen(&host_key)?;
        std::fs::copy(
            login.with_extension("pub"),
            self.dir.join("authorized_keys"),
        )
        .map_err(|e| format!("authorized_keys: {e}"))?;
        for index in 0..self.spec.hosts {
            let host = self.add_host(index)?;
            self.hosts.push(host);
        }
        for host in &mut self.hosts {
            host.sshd = Some(start_sshd(&self.dir, &host.namespace, host.address)?);
        }
        std::fs::write(&self.description, self.describe())
            .map_err(|e| format!("{}: {e}", self.description.display()))
    }

    fn add_host(&self, index: usize) -> Result<Host, String> {
        let host = Host {
            namespace: format!("{NAMESPACE_PREFIX}{index}"),
            address: Ipv4Addr::new(10, 232, 0, 10 + index as u8),
            switch_port: format!("hvdcv{index}"),
            sshd: None,
        };
        let (ns, port) = (host.namespace.as_str(), host.switch_port.as_str());
        let peer = format!("hvdcn{index}");
        let address = format!("{}/24", host.address);
        ip(&["netns", "add", ns])?;
        ip(&["link", "add", port, "type", "veth", "peer", "name", &peer])?;
        ip(&["link", "set", &peer, "netns", ns])?;
        ip(&["-n", ns, "link", "set", &peer, "name", HOST_IFACE])?;
        ip(&["-n", ns, "addr", "add", &address, "dev", HOST_IFACE])?;
        ip(&["-n", ns, "link", "set", HOST_IFACE, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        ip(&["-n", ns, "route", "add", "default", "via", "10.232.0.1"])?;
        ip(&["link", "set", port, "master", BRIDGE])?;
        ip(&["link", "set", port, "up"])?;
        // Both directions of the link: out of the host, and out of the switch to it.
        shape(Some(ns), HOST_IFACE, &self.spec.link)?;
        shape(None, port, &self.spec.link)?;
        Ok(host)
    }

    /// The file the tests read: one `key value...` per line.
    fn describe(&self) -> String {
        let mut lines = vec![
            format!("ranks_per_host {}", self.spec.ranks_per_host),
            format!("link {}", self.spec.link),
        ];
        // How hvdrun reaches the hosts, said once here rather than again in the tests.
        lines.extend(self.hvdrun_args().iter().map(|a| format!("hvdrun_arg {a}")));
        for h in &self.hosts {
            lines.push(format!(
                "host {} {} {}",
                h.namespace, h.address, h.switch_port
            ));
        }
        lines.join("\n") + "\n"
    }

    /// hvdrun's options that reach the hosts: the login key, and the interface of the
    /// cluster network on the launcher's host and on the simulated ones.
    pub fn hvdrun_args(&self) -> Vec<String> {
        vec![
            "-i".into(),
            self.dir.join("login_key").display().to_string(),
            "--ssh-option".into(),
            format!(
                "UserKnownHostsFile={}",
                self.dir.join("known_hosts").display()
            ),
            "--ssh-option".into(),
            "StrictHostKeyChecking=no".into(),
            "--ssh-option".into(),
            "LogLevel=ERROR".into(),
            "--network-interface".into(),
            format!("{BRIDGE},{HOST_IFACE}"),
        ]
    }

    /// One line for the summary.
    pub fn summary(&self) -> String {
        format!(
            "{} hosts ({} to {}) x {} ranks, each on one {} link (both ways) to a bridge; \
             no added latency (this kernel has no netem)",
            self.hosts.len(),
            self.hosts[0].address,
            self.hosts[self.hosts.len() - 1].address,
            self.spec.ranks_per_host,
            self.spec.link
        )
    }
}

fn start_sshd(dir: &Path, ns: &str, address: Ipv4Addr) -> Result<Child, String> {
    let config = dir.join(format!("sshd_{ns}"));
    std::fs::write(
        &config,
        format!(
            "Port 22\nListenAddress {address}\nHostKey {}\nAuthorizedKeysFile {}\n\
             PidFile {}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nLogLevel ERROR\n\
             MaxStartups 100\nMaxSessions 100\n",
            dir.join("host_key").display(),
            dir.join("authorized_keys").display(),
            dir.join(format!("sshd_{ns}.pid")).display(),
        ),
    )
    .map_err(|e| format!("{}: {e}", config.display()))?;
    // sshd insists on its privilege-separation directory.
    let _ = std::fs::create_dir_all("/run/sshd");
    let log = std::fs::File::create(dir.join(format!("sshd_{ns}.log")))
        .map_err(|e| format!("sshd log: {e}"))?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, SSHD, "-D", "-e", "-f"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting sshd in {ns}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&SocketAddr::from((address, 22)), Duration::from_secs(1))
        .is_err()
    {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            return Err(format!(
                "sshd in {ns} did not start listening on {address}:22"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for host in &mut self.hosts {
            if let Some(mut sshd) = host.sshd.take() {
                let _ = sshd.kill();
                let _ = sshd.wait();
            }
            remove_namespace(&host.namespace);
            let _ = ip(&["link", "del", &host.switch_port]);
        }
        let _ = ip(&["link", "del", BRIDGE]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_cluster_is_refused_naming_the_process_that_holds_the_first() {
        let path = std::env::temp_dir().join(format!("hvd-lock-test-{}", std::process::id()));
        let first = exclusive_at(&path).unwrap();
        let why = exclusive_at(&path).unwrap_err();
        assert_eq!(
            why,
            format!(
                "another simulated cluster is up (process {}, lock {}): two cannot share its \
                 network names; wait for that test-cluster to end",
                std::process::id(),
                path.display()
            )
        );
        drop(first);
        assert!(exclusive_at(&path).is_ok(), "the lock outlived its cluster");
        let _ = std::fs::remove_file(&path);
    }
}
