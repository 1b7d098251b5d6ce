//! `RdmaCollective`: hvd-core's scheduled driver over the libfabric engine.

use std::sync::Arc;

use hvd_core::driver::{Joined, Scheduled, Transport};
use hvd_core::schedule::Tuning;
use hvd_core::{Error, Result, Store, Topology};

use crate::config::RdmaConfig;
use crate::endpoint::Endpoint;
use crate::engine::{Engine, spin_for};
use crate::info::{Provider, choose};
use crate::library::library;
use crate::rendezvous::{self, Process, Record};

/// Ranks are carried in 16 bits of every message tag.
const MAX_RANKS: usize = 1 << 16;

/// One rank's member of a group connected over libfabric: hvd-core's scheduled driver
/// over this crate's engine. See the [crate docs](crate).
///
/// `RdmaCollective::connect(store, rank, size, config)` joins the group of `size` ranks
/// as `rank`: it opens an endpoint on the configured (or preferred) provider, publishes
/// its address in `store`, and fills an address vector with everyone's. Every rank
/// calls it with the same `size`, store and provider; it fails after
/// `config.start_timeout` naming the ranks that never appeared, and with
/// [`Error::LibraryMissing`] where libfabric is not installed. The provider it settled
/// on is `group.settings().provider`.
pub type RdmaCollective = Scheduled<RdmaConfig>;

impl Transport for RdmaConfig {
    type Engine = Engine;

    const BACKEND: &'static str = "rdma";

    const ROOT_PREFIX: &'static str = "rdma";

    /// Settles the provider (sub-groups use the same one) and caps the message sizes at
    /// what its endpoint carries.
    fn join(
        &self,
        store: &Arc<dyn Store>,
        prefix: &str,
        rank: usize,
        size: usize,
    ) -> Result<Joined<Self>> {
        if size > MAX_RANKS {
            return Err(Error::Config {
                name: "group size".into(),
                value: size.to_string(),
                expected: format!("at most {MAX_RANKS} ranks"),
            });
        }
        let library = library()?;
        let info = choose(self.provider.as_deref())?;
        let mut endpoint = Endpoint::open(library, info, size, self.register_memory)?;
        let provider: Provider = endpoint.provider.clone();
        let mut settings = self.clone();
        settings.provider = Some(provider.name.clone());
        settings.chunk_bytes = settings.chunk_bytes.min(endpoint.max_message);
        settings.small_bytes = settings.small_bytes.min(endpoint.max_message);
        let mine = Record {
            provider: provider.name.clone(),
            host: rendezvous::hostname(),
            process: Process::current(),
            address: endpoint.name()?,
        };
        let timeout = self.start_timeout;
        let records = rendezvous::exchange(store.as_ref(), prefix, rank, size, &mine, timeout)?;
        let names: Vec<Vec<u8>> = records.iter().map(|r| r.address.clone()).collect();
        endpoint.insert(&names)?;
        rendezvous::ready(store.as_ref(), prefix, rank, size, timeout)?;
        let topology = Topology::from_hosts(rank, rendezvous::host_ids(&records));
        let spin = spin_for(topology.local_size());
        // A pid names a process only on its own host: other hosts' init pid namespaces
        // read the same, so their ranks are never checked for having exited.
        let processes = records
            .into_iter()
            .map(|r| {
                if r.host == mine.host {
                    r.process
                } else {
                    Process::elsewhere()
                }
            })
            .collect();
        tracing::debug!("rank {rank} of {size}: group '{prefix}' runs over {provider}");
        Ok(Joined {
            topology,
            engine: Engine::new(endpoint, processes, self.op_timeout, spin)?,
            settings,
        })
    }

    /// No early halving: over libfabric's rxm, 64 KiB on 4 ranks took the same time
    /// halved or doubled.
    fn tuning(&self) -> Tuning {
        Tuning {
            small_bytes: self.small_bytes,
            chunk_bytes: self.chunk_bytes,
            early_halving: false,
        }
    }
}
