//! Which store a rank rendezvouses through, from what its launcher set.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hvd_core::{Error, FileStore, MemoryStore, Result, Store};

use super::{StoreServer, TcpStore};
use hvd_core::env;

/// The variable hvdrun sets to its rendezvous server's `host:port`.
pub const STORE_ADDR_VAR: &str = "HVD_STORE_ADDR";

/// The store for rank `rank` of a job of `size` started by `launcher`, chosen by the first
/// of these that applies:
///
/// 1. `HVD_STORE_ADDR=host:port`: the rendezvous server there (hvdrun sets it);
/// 2. `HVD_STORE_DIR=dir`: a [`FileStore`] in a directory every rank can reach;
/// 3. `MASTER_ADDR` and `MASTER_PORT` (torchrun style, or set by hand under mpirun or
///    srun): rank 0 serves the store on `MASTER_PORT` (on `MASTER_PORT + 1` under real
///    torchrun, whose agent holds `MASTER_PORT`; `HVD_STORE_PORT` overrides), and every
///    rank connects to `MASTER_ADDR`;
/// 4. a Slurm step on several nodes: the same, with rank 0 on the step's first node and a
///    port derived from the job and step ids (`HVD_STORE_PORT` overrides);
/// 5. a job that the launcher says is on one host (Open MPI, Slurm): a [`FileStore`] in
///    the temporary directory, named after the launcher's job id;
/// 6. a job of one rank: a store in memory.
///
/// Requests are authenticated with `HVD_SECRET` (hvdrun generates one per job).
pub fn store_from_env(launcher: &str, rank: usize, size: usize) -> Result<Arc<dyn Store>> {
    let secret = env::job_secret();
    let timeout = start_timeout()?;
    if let Some((_, addr)) = env::lookup("STORE_ADDR") {
        return Ok(Arc::new(TcpStore::connect(&addr, &secret, timeout)?));
    }
    if let Some((_, dir)) = env::lookup("STORE_DIR") {
        return Ok(Arc::new(FileStore::new(dir)?));
    }
    if let Some((addr, port)) = master()? {
        return master_store(rank, &addr, port, &secret, timeout);
    }
    if launcher == "Slurm"
        && let Some((addr, port)) = super::slurm::master(rank)?
    {
        let port = store_port()?.unwrap_or(port);
        return master_store(rank, &addr, port, &secret, timeout);
    }
    if let Some(dir) = one_host_dir(launcher, size)? {
        return Ok(Arc::new(FileStore::new(dir)?));
    }
    if size == 1 {
        return Ok(Arc::new(MemoryStore::new()));
    }
    Err(Error::Config {
        name: "rendezvous".into(),
        value: "none found".into(),
        expected: format!(
            "a way for the ranks to find each other (rank {rank} of {size} was started by {launcher}): start the job with hvdrun, or set MASTER_ADDR and MASTER_PORT (rank 0's host and a free port) on every rank, or HVD_STORE_DIR to a directory every rank can reach"
        ),
    })
}

fn start_timeout() -> Result<Duration> {
    Ok(env::start_timeout(|name| std::env::var(name).ok())?.unwrap_or(env::DEFAULT_START_TIMEOUT))
}

/// hvdrun's rendezvous server (`HVD_STORE_ADDR`), for a process hvdrun started before it
/// has a rank: an elastic worker, which learns its rank from the store.
pub fn launcher_store() -> Result<Arc<dyn Store>> {
    let Some((_, addr)) = env::lookup("STORE_ADDR") else {
        return Err(Error::Incomplete {
            set: "HVD_ELASTIC_WORKER".into(),
            missing: STORE_ADDR_VAR.into(),
            hint: "elastic workers are started by hvdrun, which sets both".into(),
        });
    };
    Ok(Arc::new(TcpStore::connect(
        &addr,
        &env::job_secret(),
        start_timeout()?,
    )?))
}

/// `MASTER_ADDR` and the port the store is served on, if both variables are set.
fn master() -> Result<Option<(String, u16)>> {
    let port = |names: &[&str]| env::parse_first::<u16, _>(names, "a TCP port number");
    let (addr, master_port) = match (std::env::var("MASTER_ADDR").ok(), port(&["MASTER_PORT"])?) {
        (None, None) => return Ok(None),
        (Some(addr), Some((_, port))) => (addr, port),
        (Some(_), None) => return Err(alone("MASTER_ADDR", "MASTER_PORT")),
        (None, Some(_)) => return Err(alone("MASTER_PORT", "MASTER_ADDR")),
    };
    if let Some(port) = store_port()? {
        return Ok(Some((addr, port)));
    }
    // Real torchrun's agent serves its own store on MASTER_PORT.
    let port = if std::env::var_os("TORCHELASTIC_RUN_ID").is_some() {
        master_port.checked_add(1).ok_or_else(|| Error::Config {
            name: "MASTER_PORT".into(),
            value: master_port.to_string(),
            expected: "a port below 65535 (hvd serves on MASTER_PORT + 1 under torchrun; or set HVD_STORE_PORT)".into(),
        })?
    } else {
        master_port
    };
    Ok(Some((addr, port)))
}

/// `HVD_STORE_PORT`: where rank 0 serves the store, when given.
fn store_port() -> Result<Option<u16>> {
    env::parse("STORE_PORT", "a TCP port number")
}

fn alone(set: &str, missing: &str) -> Error {
    Error::Incomplete {
        set: set.into(),
        missing: missing.into(),
        hint: "together they give rank 0's host and port for rendezvous".into(),
    }
}

fn master_store(
    rank: usize,
    addr: &str,
    port: u16,
    secret: &[u8],
    timeout: Duration,
) -> Result<Arc<dyn Store>> {
    if secret.is_empty() {
        tracing::info!(
            "rendezvous through {addr}:{port} is not authenticated: set the same HVD_SECRET on every rank to authenticate it"
        );
    }
    if rank == 0 {
        return served_on(port, secret);
    }
    Ok(Arc::new(TcpStore::connect(
        &format!("{addr}:{port}"),
        secret,
        timeout,
    )?))
}

/// The stores this process serves, by port. Rank 0 that starts the job again (`hvd.init()`
/// after `hvd.shutdown()`) finds its first server still listening on `MASTER_PORT` (it is
/// detached: the others may still be connecting when rank 0 is done with it), so it serves
/// the same store again; each start of a job uses fresh keys in it.
static SERVED: Mutex<Vec<(u16, Arc<dyn Store>)>> = Mutex::new(Vec::new());

/// The store this process serves on `port`, started on first use.
fn served_on(port: u16, secret: &[u8]) -> Result<Arc<dyn Store>> {
    let mut served = SERVED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, store)) = served.iter().find(|(p, _)| *p == port) {
        return Ok(store.clone());
    }
    let server = StoreServer::start(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)), secret)
        .map_err(|e| Error::Store(format!(
            "rank 0 cannot serve the rendezvous store on port {port} (MASTER_PORT; is it free?): {e}"
        )))?;
    let store = server.store();
    server.detach();
    served.push((port, store.clone()));
    Ok(store)
}

/// A launcher's job id and whether it placed every rank on this host.
struct OneHost {
    launcher: &'static str,
    job: &'static [&'static str],
    all_local: fn(usize) -> bool,
}

fn var_is(name: &str, expected: usize) -> bool {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()) == Some(expected)
}

const ONE_HOST: [OneHost; 2] = [
    OneHost {
        launcher: "Open MPI",
        job: &["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"],
        all_local: |size| var_is("OMPI_COMM_WORLD_LOCAL_SIZE", size),
    },
    OneHost {
        launcher: "Slurm",
        job: &["SLURM_JOB_ID"],
        all_local: |_| var_is("SLURM_STEP_NUM_NODES", 1) || var_is("SLURM_NNODES", 1),
    },
];

/// For a job its launcher placed on this host alone: a directory named after its job id.
fn one_host_dir(launcher: &str, size: usize) -> Result<Option<PathBuf>> {
    let Some(known) = ONE_HOST.iter().find(|k| k.launcher == launcher) else {
        return Ok(None);
    };
    let Some((_, job)) = env::first_set(known.job) else {
        return Ok(None);
    };
    if !(known.all_local)(size) {
        return Ok(None);
    }
    let step = std::env::var("SLURM_STEP_ID").unwrap_or_default();
    let name: String = format!("hvd-{launcher}-{job}-{step}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(Some(std::env::temp_dir().join(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_0_starting_the_job_again_serves_the_same_store_on_its_port() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let first = served_on(port, b"secret").unwrap();
        first.set("start0/key", b"kept").unwrap();
        let again = served_on(port, b"secret").unwrap();
        assert_eq!(
            again.try_get("start0/key").unwrap().as_deref(),
            Some(&b"kept"[..])
        );
        // A client reaches the same store on the port.
        let client = TcpStore::connect(
            &format!("127.0.0.1:{port}"),
            b"secret",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(
            client.try_get("start0/key").unwrap().as_deref(),
            Some(&b"kept"[..])
        );
    }
}
