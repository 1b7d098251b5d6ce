//! A second "host" on this machine: a network namespace joined to this one by a veth
//! pair, with its own addresses and no route to this host's other interfaces, running an
//! sshd of its own. Ranks started there see a different host, as on a real cluster.

use std::net::IpAddr;
use std::process::Command;

use super::sshd::Sshd;

pub struct NetnsHost {
    name: String,
    /// This side's interface and address, and the other side's.
    pub here_iface: String,
    pub there_iface: String,
    pub there: IpAddr,
    pub sshd: Option<Sshd>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetnsHost {
    /// Creates the namespace and starts sshd in it. Tests that call it are ignored
    /// where this machine has no root or no iproute2 (see the `hvd` build script);
    /// elsewhere a namespace that cannot be made fails the test.
    pub fn start(index: u8) -> NetnsHost {
        let tag = format!("hvdt{}x{index}", std::process::id() % 100_000);
        // `veth` first: automatic interface choice skips such names, so tests that run
        // meanwhile on this host do not see this one as a way out.
        let short = format!("{}x{index}", std::process::id() % 100_000);
        let host = NetnsHost {
            name: tag.clone(),
            here_iface: format!("vethh{short}a"),
            there_iface: format!("vethh{short}b"),
            there: format!("10.231.{index}.2").parse().unwrap(),
            sshd: None,
        };
        let here_addr = format!("10.231.{index}.1/24");
        let there_addr = format!("10.231.{index}.2/24");
        let (ns, a, b) = (
            tag.clone(),
            host.here_iface.clone(),
            host.there_iface.clone(),
        );
        let (ns, a, b) = (ns.as_str(), a.as_str(), b.as_str());
        let made = ip(&["netns", "add", ns])
            .and_then(|()| ip(&["link", "add", a, "type", "veth", "peer", "name", b]))
            .and_then(|()| ip(&["link", "set", b, "netns", ns]))
            .and_then(|()| ip(&["addr", "add", &here_addr, "dev", a]))
            .and_then(|()| ip(&["link", "set", a, "up"]))
            .and_then(|()| ip(&["-n", ns, "addr", "add", &there_addr, "dev", b]))
            .and_then(|()| ip(&["-n", ns, "link", "set", b, "up"]))
            .and_then(|()| ip(&["-n", ns, "link", "set", "lo", "up"]));
        if let Err(why) = made {
            panic!("cannot make a network namespace here: {why}");
        }
        let mut host = host;
        host.sshd = Some(Sshd::start_at(host.there, 22, &["ip", "netns", "exec", ns]));
        host
    }
}

impl Drop for NetnsHost {
    fn drop(&mut self) {
        // sshd first: a namespace with a process in it lingers.
        self.sshd.take();
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.here_iface]);
    }
}
