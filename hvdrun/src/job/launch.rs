//! What every rank of one run shares (the rendezvous server, its secret) and the
//! variables that place each rank.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use hvd_core::{Error, Result};
use hvd_rendezvous::StoreServer;

use super::spec::Job;
use crate::hosts::{Host, Placement};

/// What every rank of one run shares.
pub(crate) struct Launch<'a> {
    /// Whether the ranks are on more than one host (summaries then name the host).
    pub multi_host: bool,
    pub store_addr: String,
    pub secret: &'a str,
    /// The launcher's directory, where remote ranks start when their host has it.
    pub dir: PathBuf,
}

fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| Error::Io {
        context: "generating the job secret".into(),
        message: e.to_string(),
        kind: std::io::ErrorKind::Other,
    })?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

impl Job {
    /// What every rank of a run started through `server` shares.
    pub(crate) fn launch<'a>(
        &self,
        server: &StoreServer,
        secret: &'a str,
        multi_host: bool,
    ) -> Result<Launch<'a>> {
        Ok(Launch {
            multi_host,
            store_addr: server.addr().to_string(),
            secret,
            dir: std::env::current_dir()
                .map_err(|e| Error::io("reading the current directory", &e))?,
        })
    }

    /// A fresh secret and the rendezvous server of a run on `hosts`, which every rank
    /// proves it knows.
    pub(crate) fn serve(&self, hosts: &[Host]) -> Result<(String, StoreServer)> {
        let secret = random_hex(16)?;
        let server = StoreServer::start(self.server_address(hosts)?, secret.as_bytes())?;
        Ok((secret, server))
    }

    /// The variables that place rank `rank` of a job of fixed size, under hvd's names
    /// and Horovod's (`HOROVOD_RANK`, ...), which programs written for Horovod read.
    pub(super) fn rank_env(
        &self,
        rank: usize,
        host: &Host,
        placement: &Placement,
        cross_size: usize,
    ) -> Vec<(String, String)> {
        let place = [
            ("RANK", rank.to_string()),
            ("SIZE", self.np.to_string()),
            ("LOCAL_RANK", placement.local_rank.to_string()),
            ("LOCAL_SIZE", placement.local_size.to_string()),
            ("CROSS_RANK", placement.host.to_string()),
            ("CROSS_SIZE", cross_size.to_string()),
            ("HOSTNAME", host.name.clone()),
        ];
        ["HVD", "HOROVOD"]
            .iter()
            .flat_map(|prefix| {
                place
                    .iter()
                    .map(move |(name, value)| (format!("{prefix}_{name}"), value.clone()))
            })
            .collect()
    }

    /// Where the rendezvous server listens: loopback for a job on this host alone,
    /// otherwise an address the other hosts can reach (of `--network-interface`, or the
    /// first routable address of a physical-looking interface).
    fn server_address(&self, hosts: &[Host]) -> Result<SocketAddr> {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        if hosts.iter().all(Host::is_this_machine) {
            return Ok(loopback);
        }
        let interfaces = hvd_core::net::interfaces()?;
        let plan = hvd_core::net::listen_plan(
            &interfaces,
            self.interface.as_deref(),
            "--network-interface",
        )?;
        if let Some(ip) = plan.publish.first() {
            return Ok(SocketAddr::new(*ip, 0));
        }
        let all_loopback = hosts.iter().all(|h| {
            h.is_this_machine() || h.name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        });
        if all_loopback {
            return Ok(loopback);
        }
        Err(Error::Config {
            name: "--network-interface".into(),
            value: "unset".into(),
            expected: "an interface other hosts can reach this one on: this host has no routable address outside loopback and container bridges".into(),
        })
    }
}
