//! Hierarchical allreduce across hosts: the chosen transport as the flat group, and the
//! transport that connects the ranks of one host (shared memory) within each.

use std::sync::Arc;

use hvd_core::provider::Place;
use hvd_core::{Collective, Error, PrefixStore, Result, Store};

use super::providers::providers;
use crate::World;

/// `flat` as is on one host; across hosts, unless `HVD_HIERARCHICAL_ALLREDUCE` (alias
/// `HOROVOD_HIERARCHICAL_ALLREDUCE`) is off, `Hierarchical<shm, flat>`: allreduce
/// within each host through shared memory, across hosts through `flat`.
pub(super) fn hierarchical_over(
    flat: Box<dyn Collective>,
    world: &World,
) -> Result<Box<dyn Collective>> {
    let wanted = hvd_core::env::flag("HIERARCHICAL_ALLREDUCE")?;
    let topology = flat.topology().clone();
    if topology.is_single_host() || wanted == Some(false) {
        return Ok(flat);
    }
    let Some(within) = providers().iter().find(|p| p.within_host()) else {
        return match wanted {
            Some(true) => Err(Error::Config {
                name: "HVD_HIERARCHICAL_ALLREDUCE".into(),
                value: "1".into(),
                expected:
                    "a build with the shm feature, which hierarchical allreduce uses within hosts"
                        .into(),
            }),
            _ => Ok(flat),
        };
    };
    // Every rank of a host names the host alike: by its index in the flat group.
    let host = topology.hosts()[topology.rank()];
    let place = HostPlace {
        rank: topology.local_rank(),
        size: topology.local_size(),
        store: Arc::new(PrefixStore::new(
            world.store.clone(),
            format!("hier/host{host}/"),
        )),
        world,
    };
    let local = within.connect(&place, None)?;
    Ok(Box::new(hvd_hierarchical::Hierarchical::new(flat, local)?))
}

/// The ranks of this host, as the transport within it sees them.
struct HostPlace<'a> {
    rank: usize,
    size: usize,
    store: Arc<dyn Store>,
    world: &'a World,
}

impl Place for HostPlace<'_> {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
    fn launcher(&self) -> &'static str {
        self.world.launcher
    }
    fn launched_by_mpi(&self) -> bool {
        self.world.launched_by_mpi()
    }
    fn on_one_host(&self) -> Result<bool> {
        Ok(true)
    }
}

#[cfg(all(test, feature = "shm"))]
mod tests {
    use hvd_core::reference::LocalGroup;
    use hvd_core::{MemoryStore, ReduceOp, Reduction, TensorMut};

    use super::*;

    /// Four ranks as threads on two pretend hosts: the reference transport as the flat
    /// group, and the provider that connects within a host (shared memory) under it.
    #[test]
    fn across_hosts_the_flat_group_runs_with_the_within_host_transport_under_it() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let flats = LocalGroup::new(4).hosts(vec![0, 0, 1, 1]).build();
        let ranks: Vec<_> = flats
            .into_iter()
            .enumerate()
            .map(|(rank, flat)| {
                let world = World {
                    rank,
                    size: 4,
                    launcher: "hvdrun",
                    store: store.clone(),
                    local_size: Some(2),
                };
                std::thread::spawn(move || -> Result<(String, f32)> {
                    let stacked = hierarchical_over(Box::new(flat), &world)?;
                    let mut value = [rank as f32 + 1.0];
                    stacked.allreduce(
                        &mut [TensorMut::from_slice("grad", &mut value)],
                        Reduction::new(ReduceOp::Sum),
                    )?;
                    Ok((stacked.backend().to_string(), value[0]))
                })
            })
            .collect();
        for (rank, handle) in ranks.into_iter().enumerate() {
            let (backend, sum) = handle.join().expect("rank thread").expect("rank");
            assert_eq!(backend, "hierarchical", "rank {rank}");
            assert_eq!(sum, 10.0, "rank {rank}");
        }
    }
}
