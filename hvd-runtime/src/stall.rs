//! The stall inspector: names the ranks that keep everyone waiting, and ends the wait.
//!
//! After the check time, rank 0 warns once per tensor with the ranks that submitted it
//! and the ranks that did not. After the shutdown time, rank 0 decides that the tensor
//! fails and tells every rank in its next announcement, so that all ranks fail it in the
//! same cycle with the same message.

use std::collections::HashSet;
use std::time::Duration;

use hvd_core::Error;

use super::response::Response;
use super::table::MessageTable;
use super::wire::StallVerdict;

pub(super) struct StallInspector {
    rank: usize,
    check: Option<Duration>,
    shutdown: Option<Duration>,
    warned: HashSet<String>,
    decided: HashSet<String>,
}

fn ranks(list: &[usize]) -> String {
    list.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl StallInspector {
    pub fn new(rank: usize, check: Option<Duration>, shutdown: Option<Duration>) -> Self {
        StallInspector {
            rank,
            check,
            shutdown,
            warned: HashSet::new(),
            decided: HashSet::new(),
        }
    }

    /// How long a tensor may wait on the response cache's fast path before it is
    /// announced, so that the table (and this inspector) see which ranks are missing.
    pub fn cached_patience(&self) -> Duration {
        match (self.check, self.shutdown) {
            (Some(check), _) | (None, Some(check)) => check / 2,
            (None, None) => Duration::MAX,
        }
    }

    /// Rank 0 warns about tensors waiting longer than the check time.
    pub fn warn(&mut self, table: &MessageTable) {
        let Some(check) = self.check else {
            return;
        };
        if self.rank != 0 {
            return;
        }
        for stall in table.stalls(check) {
            if self.warned.insert(stall.name.clone()) {
                tracing::warn!(
                    "stalled for {:.0?}: tensor '{}' was submitted by rank(s) {} but not yet by rank(s) {}; \
                     one rank may have diverged (different tensors or order) or be stuck \
                     (HVD_STALL_CHECK_TIME={:?})",
                    stall.waited,
                    stall.name,
                    ranks(&stall.submitted),
                    ranks(&stall.missing),
                    check
                );
            }
        }
    }

    /// Rank 0's verdicts: tensors waiting longer than the shutdown time, once each.
    pub fn verdicts(&mut self, table: &MessageTable) -> Vec<StallVerdict> {
        let Some(shutdown) = self.shutdown.filter(|_| self.rank == 0) else {
            return Vec::new();
        };
        table
            .stalls(shutdown)
            .into_iter()
            .filter(|s| self.decided.insert(s.name.clone()))
            .map(|s| StallVerdict {
                name: s.name,
                waited_ms: s.waited.as_millis() as u64,
                missing: s.missing,
            })
            .collect()
    }

    /// Carries out a verdict on this rank: the tensor leaves the table and fails.
    pub fn fail(&mut self, table: &mut MessageTable, verdict: &StallVerdict) -> Option<Response> {
        self.warned.remove(&verdict.name);
        self.decided.remove(&verdict.name);
        let kind = table.remove(&verdict.name)?;
        Some(Response {
            name: verdict.name.as_str().into(),
            kind,
            outcome: Err(Error::Timeout {
                rank: self.rank,
                op: kind.name(),
                tensor: verdict.name.clone(),
                waited: Duration::from_millis(verdict.waited_ms),
                waiting_for: format!(
                    "rank(s) {} to submit it (stall shutdown: HVD_STALL_SHUTDOWN_TIME)",
                    ranks(&verdict.missing)
                ),
            }),
        })
    }
}
