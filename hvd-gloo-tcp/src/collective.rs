//! `TcpCollective`: hvd-core's scheduled driver over the TCP event loop.

use std::sync::Arc;

use hvd_core::driver::{Call, Engine, Joined, Scheduled, Transport};
use hvd_core::schedule::{Layout, Schedule, Tuning};
use hvd_core::{Result, Store};

use crate::config::TcpConfig;
use crate::io::{EventLoop, Polling};
use crate::mesh::Joiner;
use crate::silence;

/// One rank's member of a group connected over TCP: hvd-core's scheduled driver over
/// this crate's event loop. See the [crate docs](crate).
///
/// `TcpCollective::connect(store, rank, size, config)` joins the group of `size` ranks
/// as `rank`: it listens, publishes this rank's endpoint in `store`, and connects to
/// every other rank. Every rank calls it with the same `size` and store; it returns once
/// this rank is connected to all the others, or fails after `config.start_timeout`
/// naming the ranks that never appeared.
pub type TcpCollective = Scheduled<TcpConfig>;

impl Transport for TcpConfig {
    type Engine = TcpEngine;

    const BACKEND: &'static str = "tcp";

    const ROOT_PREFIX: &'static str = "tcp";

    fn join(
        &self,
        store: &Arc<dyn Store>,
        prefix: &str,
        rank: usize,
        size: usize,
    ) -> Result<Joined<Self>> {
        let mesh = Joiner {
            store: store.as_ref(),
            prefix,
            rank,
            size,
            config: self,
        }
        .form()?;
        let polling = Polling::for_ranks_on_host(mesh.topology.local_size(), self.busy_poll);
        let event_loop =
            EventLoop::new(size, mesh.links, self.op_timeout, polling).map_err(|e| {
                hvd_core::Error::io(format!("rank {rank}: setting up the event loop"), &e)
            })?;
        Ok(Joined {
            topology: mesh.topology,
            engine: TcpEngine {
                event_loop,
                store: store.clone(),
                prefix: prefix.to_owned(),
                op_timeout: self.op_timeout,
            },
            settings: self.clone(),
        })
    }

    fn tuning(&self) -> Tuning {
        Tuning {
            small_bytes: self.small_bytes,
            chunk_bytes: self.chunk_bytes,
            early_halving: true,
        }
    }
}

/// The event loop of one group, and what it needs to blame the right rank when a call
/// times out.
pub struct TcpEngine {
    event_loop: EventLoop,
    store: Arc<dyn Store>,
    prefix: String,
    op_timeout: std::time::Duration,
}

impl std::fmt::Debug for TcpEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpEngine")
            .field("prefix", &self.prefix)
            .field("op_timeout", &self.op_timeout)
            .finish_non_exhaustive()
    }
}

impl Engine for TcpEngine {
    /// A failure is blamed on the rank at the end of the chain of waits (see
    /// [`silence`]) and told to the other ranks in ABORT frames.
    fn run(
        &mut self,
        call: &Call<'_>,
        layout: &mut Layout<'_>,
        schedule: &mut dyn Schedule,
    ) -> Result<()> {
        let Err(fault) = self.event_loop.run(call, layout, schedule) else {
            return Ok(());
        };
        let timeout = self.op_timeout;
        let fault = silence::find_silent(
            self.store.as_ref(),
            &self.prefix,
            call,
            *fault,
            timeout,
            silence::grace(timeout),
        );
        self.event_loop.abort(&fault, call, layout);
        Err(fault.error)
    }
}
