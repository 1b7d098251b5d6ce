//! A private sshd, so the launcher's remote path runs for real: a host key and a login
//! key made for the test, root login by that key only. On a loopback address, or inside
//! a network namespace of its own (a host with its own network stack, see `netns.rs`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";
/// The "other host": on loopback, but not a name hvdrun takes for this machine.
pub const REMOTE: &str = "127.0.0.2";

pub struct Sshd {
    _dir: tempfile::TempDir,
    child: Child,
    listen: IpAddr,
    pub port: u16,
    key: PathBuf,
    known_hosts: PathBuf,
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen made {}", path.display());
}

fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).expect("a free port");
    listener.local_addr().unwrap().port()
}

impl Sshd {
    /// Starts sshd on 127.0.0.2. Tests that call it are ignored where sshd is not
    /// installed (see the `hvd` build script).
    pub fn start() -> Sshd {
        Sshd::start_at(REMOTE.parse().unwrap(), free_port(), &[])
    }

    /// Starts sshd listening on `listen:port`, run through `prefix` (such as
    /// `ip netns exec NAME`).
    pub fn start_at(listen: IpAddr, port: u16, prefix: &[&str]) -> Sshd {
        let dir = tempfile::tempdir().unwrap();
        let host_key = dir.path().join("host_key");
        let key = dir.path().join("login_key");
        keygen(&host_key);
        keygen(&key);
        let authorized = dir.path().join("authorized_keys");
        std::fs::copy(key.with_extension("pub"), &authorized).unwrap();
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress {listen}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PidFile {}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nLogLevel ERROR\n",
                host_key.display(),
                authorized.display(),
                dir.path().join("sshd.pid").display(),
            ),
        )
        .unwrap();
        // sshd insists on its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let (program, before) = match prefix.split_first() {
            Some((program, rest)) => (*program, [rest, &[SSHD]].concat()),
            None => (SSHD, vec![]),
        };
        let child = Command::new(program)
            .args(before)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(Stdio::null())
            .spawn()
            .expect("sshd starts");
        let sshd = Sshd {
            known_hosts: dir.path().join("known_hosts"),
            _dir: dir,
            child,
            listen,
            port,
            key,
        };
        sshd.wait_ready();
        sshd
    }

    fn wait_ready(&self) {
        let addr = SocketAddr::new(self.listen, self.port);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "sshd did not start listening");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// hvdrun's options that log in with this sshd's key to `port` (its own, or another
    /// to test a refused connection).
    pub fn hvdrun_args_on(&self, port: u16) -> Vec<String> {
        vec![
            "-p".into(),
            port.to_string(),
            "-i".into(),
            self.key.display().to_string(),
            "--ssh-option".into(),
            format!("UserKnownHostsFile={}", self.known_hosts.display()),
            "--ssh-option".into(),
            "StrictHostKeyChecking=no".into(),
            "--ssh-option".into(),
            "LogLevel=ERROR".into(),
        ]
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
