//! The driver's side of an elastic job, for a driver written in Python (hvd.ray's, which
//! starts workers as Ray actors where hvdrun starts processes): the job's store, served
//! by the driver, and the protocol hvdrun's elastic supervisor speaks through it
//! (`hvd::rendezvous::elastic`): rounds formed and published, workers' reports read,
//! host changes announced. The workers' side is `elastic.rs`, unchanged: a worker
//! under Ray is a worker under hvdrun.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use hvd::core::{MemoryStore, PrefixStore, Store};
use hvd::rendezvous::elastic::round::{Candidate, assign};
use hvd::rendezvous::elastic::{
    Leaving, UPDATES_KEY, current_round, fatal_key, publish_round, round_prefix, updates,
    waiting_key,
};
use hvd::rendezvous::{StoreServer, lost_by};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::to_py;

/// The rounds of one elastic job and the store its workers meet at.
#[pyclass(module = "hvd._hvd", name = "ElasticRounds", frozen)]
pub(crate) struct ElasticRounds {
    server: StoreServer,
}

impl ElasticRounds {
    fn store(&self) -> Arc<MemoryStore> {
        self.server.store()
    }
}

#[pymethods]
impl ElasticRounds {
    /// Serves the job's store on `ip` (a port of its own), to workers that prove they
    /// know `secret` (their `HVD_SECRET`).
    #[new]
    fn new(py: Python<'_>, ip: &str, secret: &str) -> PyResult<Self> {
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| PyValueError::new_err(format!("not an IP address: {ip:?}")))?;
        let server = py
            .detach(|| StoreServer::start(SocketAddr::new(ip, 0), secret.as_bytes()))
            .map_err(to_py)?;
        Ok(ElasticRounds { server })
    }

    /// `ip:port`, the workers' `HVD_STORE_ADDR`.
    #[getter]
    fn address(&self) -> String {
        self.server.addr().to_string()
    }

    /// The newest round formed, 0 before the first (the workers started now join a
    /// later one: their `HVD_ELASTIC_AFTER`).
    #[getter]
    fn round(&self) -> PyResult<u64> {
        current_round(self.store().as_ref()).map_err(to_py)
    }

    /// Forms the next round of `members` (worker, host), in rank order: places them as
    /// hvdrun places its workers and publishes the round. Returns its number.
    fn form(&self, members: Vec<(String, String)>) -> PyResult<u64> {
        let store = self.store();
        let next = current_round(store.as_ref())
            .map_err(to_py)?
            .checked_add(1)
            .ok_or_else(|| {
                PyRuntimeError::new_err(
                    "elastic.round in the store is at its largest value: the store holds garbage",
                )
            })?;
        let candidates: Vec<Candidate> = members
            .into_iter()
            .map(|(id, host)| Candidate { id, host })
            .collect();
        let changes = updates(store.as_ref()).map_err(to_py)?;
        publish_round(store.as_ref(), next, &assign(&candidates, changes)).map_err(to_py)?;
        Ok(next)
    }

    /// How `worker` left `round` (`"failed"` or `"updated"`), or None if it has not.
    fn leaving(&self, round: u64, worker: &str) -> PyResult<Option<&'static str>> {
        let posted = self
            .store()
            .try_get(&waiting_key(round, worker))
            .map_err(to_py)?;
        Ok(posted.and_then(|p| Leaving::parse(&p)).map(Leaving::as_str))
    }

    /// The rank that rank `rank` of `round` reported it lost, if it reported one.
    fn lost_by(&self, round: u64, rank: usize) -> Option<usize> {
        lost_by(&PrefixStore::new(self.store(), round_prefix(round)), rank)
    }

    /// Tells the workers of the current round to leave it at their next commit.
    fn announce_update(&self) -> PyResult<()> {
        self.store().add(UPDATES_KEY, 1).map(|_| ()).map_err(to_py)
    }

    /// The error `worker` reported that no new round cures, if it reported one.
    fn fatal(&self, worker: &str) -> PyResult<Option<String>> {
        let posted = self.store().try_get(&fatal_key(worker)).map_err(to_py)?;
        Ok(posted.map(|p| String::from_utf8_lossy(&p).into_owned()))
    }
}
