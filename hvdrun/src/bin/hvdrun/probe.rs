//! One host's part of `hvdrun --check`, run as a rank of a job of one rank per host: it
//! listens where a rank's transport would, publishes that through the job's store, and
//! tries a TCP connection to every other host's probe. Rank 0 prints the report.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use hvd::core::net::{self, Interface};
use hvd::{Store, World};

/// How long one connection attempt may take.
const CONNECT: Duration = Duration::from_secs(3);
/// How long a probe waits for the others.
const WAIT: Duration = Duration::from_secs(60);

/// What a probe publishes: its host, the interfaces it chose, and where it listens.
struct Listening {
    host: String,
    interfaces: String,
    addrs: Vec<SocketAddr>,
}

impl Listening {
    fn encode(&self) -> String {
        let addrs: Vec<String> = self.addrs.iter().map(SocketAddr::to_string).collect();
        format!("{}\t{}\t{}", self.host, self.interfaces, addrs.join(","))
    }

    fn decode(text: &str) -> Option<Listening> {
        let mut parts = text.split('\t');
        let (host, interfaces, addrs) = (parts.next()?, parts.next()?, parts.next()?);
        let addrs = addrs
            .split(',')
            .filter(|a| !a.is_empty())
            .map(|a| a.parse().ok())
            .collect::<Option<Vec<SocketAddr>>>()?;
        Some(Listening {
            host: host.into(),
            interfaces: interfaces.into(),
            addrs,
        })
    }
}

fn names_of(ips: &[IpAddr], interfaces: &[Interface]) -> String {
    let mut names: Vec<&str> = ips
        .iter()
        .filter_map(|ip| interfaces.iter().find(|i| i.ip == *ip))
        .map(|i| i.name.as_str())
        .collect();
    names.dedup();
    if names.is_empty() {
        "loopback only".into()
    } else {
        names.join(",")
    }
}

pub fn run() -> Result<(), String> {
    let world = World::from_env().map_err(|e| e.to_string())?;
    let store = world.store.as_ref();
    let interfaces = net::interfaces().map_err(|e| e.to_string())?;
    let explicit = std::env::var("HVD_IFACE").ok();
    let plan = net::listen_plan(&interfaces, explicit.as_deref(), "--network-interface")
        .map_err(|e| e.to_string())?;
    let listener = TcpListener::bind((plan.bind, 0)).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    // Connections only need to be accepted: that they open is what is checked.
    std::thread::spawn(move || for _ in listener.incoming() {});
    let ips = if plan.publish.is_empty() {
        vec![IpAddr::from([127, 0, 0, 1])]
    } else {
        plan.publish.clone()
    };
    let me = Listening {
        host: std::env::var("HVD_HOSTNAME").unwrap_or_else(|_| net::hostname()),
        interfaces: names_of(&ips, &interfaces),
        addrs: ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect(),
    };
    let key = |what: &str, rank: usize| format!("hvd.probe.{what}.{rank}");
    let failed = |e: hvd::Error| e.to_string();
    store
        .set(&key("listen", world.rank), me.encode().as_bytes())
        .map_err(failed)?;
    let mut lines = String::new();
    for backend in hvd::Backend::compiled() {
        for line in backend.report().unwrap_or_default() {
            let _ = writeln!(lines, "  {:<4} {:<20} {line}", backend.name(), me.host);
        }
    }
    let mut all_ok = true;
    for peer in (0..world.size).filter(|&p| p != world.rank) {
        let bytes = store.get(&key("listen", peer), WAIT).map_err(failed)?;
        let theirs = Listening::decode(&String::from_utf8_lossy(&bytes))
            .ok_or_else(|| format!("probe {peer} published something unreadable"))?;
        for addr in &theirs.addrs {
            let result = TcpStream::connect_timeout(addr, CONNECT);
            all_ok &= result.is_ok();
            let verdict = result.map_or_else(|e| format!("FAILED: {e}"), |_| "ok".into());
            let _ = writeln!(
                lines,
                "  tcp  {} -> {} at {addr}: {verdict}",
                me.host, theirs.host
            );
        }
    }
    let result = format!("{}\n{lines}", u8::from(all_ok));
    store
        .set(&key("result", world.rank), result.as_bytes())
        .map_err(failed)?;
    // Listeners stay up until every probe has tried every other.
    store.add("hvd.probe.done", 1).map_err(failed)?;
    if world.rank == 0 {
        return report(store, world.size, &key, &me);
    }
    wait_for_all(store, world.size)
}

fn wait_for_all(store: &dyn Store, size: usize) -> Result<(), String> {
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        let done = store.add("hvd.probe.done", 0).map_err(|e| e.to_string())?;
        if done >= size as i64 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err("the other probes did not finish in time".into())
}

/// Rank 0: every host's interface and every connection's result; an error if any failed.
fn report(
    store: &dyn Store,
    size: usize,
    key: &dyn Fn(&str, usize) -> String,
    me: &Listening,
) -> Result<(), String> {
    let mut all_ok = true;
    let mut out = String::new();
    let mut connections = String::new();
    for rank in 0..size {
        let listen = if rank == 0 {
            me.encode()
        } else {
            let bytes = store
                .get(&key("listen", rank), WAIT)
                .map_err(|e| e.to_string())?;
            String::from_utf8_lossy(&bytes).into_owned()
        };
        if let Some(l) = Listening::decode(&listen) {
            let addrs: Vec<String> = l.addrs.iter().map(|a| a.ip().to_string()).collect();
            let _ = writeln!(
                out,
                "  net  {:<20} interface {} ({})",
                l.host,
                l.interfaces,
                addrs.join(", ")
            );
        }
        let bytes = store
            .get(&key("result", rank), WAIT)
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&bytes);
        let (ok, lines) = text.split_once('\n').unwrap_or(("0", ""));
        all_ok &= ok == "1";
        connections.push_str(lines);
    }
    print!("{out}{connections}");
    wait_for_all(store, size)?;
    if all_ok {
        Ok(())
    } else {
        Err("some hosts cannot open TCP connections to others on the chosen interfaces: see FAILED above (a firewall, or another interface: --network-interface)".into())
    }
}
