//! Where this process stands in a job: rank, size, and the rendezvous store.
//!
//! The rank and size come from whichever launcher started the process, in this order:
//! hvdrun and `hvd-bench --np` (`HVD_RANK`, `HVD_SIZE`, Horovod's `HOROVOD_*` aliases),
//! Open MPI's mpirun (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`), MPICH and Intel MPI
//! (`PMI_RANK`, `PMI_SIZE`), Slurm's srun (`SLURM_PROCID`, `SLURM_NTASKS`), and
//! torchrun-style launchers (`RANK`, `WORLD_SIZE`). With none of them, the process is a
//! job of one rank.
//!
//! Ranks rendezvous through a store: hvdrun's server, rank 0's under torchrun-style
//! variables, or a directory; [`hvd_rendezvous::store_from_env`] says which. The MPI
//! transport needs none (see [`World::from_env_without_store`]).

use std::sync::Arc;

use hvd_core::{Error, MemoryStore, Result, Store};

use hvd_core::env;

/// This process's place in the job and the store its ranks rendezvous through.
#[derive(Clone)]
pub struct World {
    pub rank: usize,
    pub size: usize,
    /// Which launcher's variables gave the rank and size.
    pub launcher: &'static str,
    pub store: Arc<dyn Store>,
    /// How many ranks run on this host, when the launcher says.
    pub local_size: Option<usize>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("launcher", &self.launcher)
            .field("local_size", &self.local_size)
            .finish_non_exhaustive()
    }
}

/// A launcher's pair of variables for the rank and the job size.
struct Launcher {
    name: &'static str,
    rank: &'static [&'static str],
    size: &'static [&'static str],
}

const LAUNCHERS: [Launcher; 5] = [
    Launcher {
        name: "hvdrun",
        rank: &["HVD_RANK", "HOROVOD_RANK"],
        size: &["HVD_SIZE", "HOROVOD_SIZE"],
    },
    Launcher {
        name: "Open MPI",
        rank: &["OMPI_COMM_WORLD_RANK"],
        size: &["OMPI_COMM_WORLD_SIZE"],
    },
    Launcher {
        name: "MPICH",
        rank: &["PMI_RANK"],
        size: &["PMI_SIZE"],
    },
    Launcher {
        name: "Slurm",
        rank: &["SLURM_PROCID"],
        size: &["SLURM_NTASKS"],
    },
    Launcher {
        name: "torchrun",
        rank: &["RANK"],
        size: &["WORLD_SIZE"],
    },
];

fn number(names: &[&str]) -> Result<Option<(String, usize)>> {
    env::parse_first(names, "a whole number")
}

/// The error for one of a launcher's rank and size variables without the other: names
/// the companion of the same spelling (`HOROVOD_RANK` wants `HOROVOD_SIZE`).
fn incomplete(launcher: &Launcher, set: &str, family: &[&str], companions: &[&str]) -> Error {
    let at = family.iter().position(|n| *n == set).unwrap_or(0);
    Error::Incomplete {
        set: set.into(),
        missing: companions[at.min(companions.len() - 1)].into(),
        hint: format!(
            "{} sets both; set both, or neither to run one rank on its own",
            launcher.name
        ),
    }
}

/// The first launcher whose variables are set: its name, the rank and the size.
fn detect() -> Result<Option<(&'static str, usize, usize)>> {
    for launcher in &LAUNCHERS {
        match (number(launcher.rank)?, number(launcher.size)?) {
            (None, None) => continue,
            (Some((rank_name, rank)), Some((size_name, size))) => {
                if rank >= size {
                    return Err(Error::Config {
                        name: rank_name,
                        value: rank.to_string(),
                        expected: format!("a rank below {size_name}={size}"),
                    });
                }
                return Ok(Some((launcher.name, rank, size)));
            }
            (Some((set, _)), None) => {
                return Err(incomplete(launcher, &set, launcher.rank, launcher.size));
            }
            (None, Some((set, _))) => {
                return Err(incomplete(launcher, &set, launcher.size, launcher.rank));
            }
        }
    }
    Ok(None)
}

/// How many ranks share this host, as launchers say it: hvdrun, Open MPI, MPICH,
/// torchrun.
const LOCAL_SIZE: [&str; 5] = [
    "HVD_LOCAL_SIZE",
    "HOROVOD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
    "LOCAL_WORLD_SIZE",
];

/// How many ranks share this host, if the launcher says.
fn local_size() -> Result<Option<usize>> {
    Ok(env::parse_first::<usize, _>(&LOCAL_SIZE, "a whole number")?.map(|(_, n)| n))
}

/// Whether Slurm says the job runs on one node.
fn one_slurm_node() -> Result<bool> {
    let nodes =
        env::parse_first::<usize, _>(&["SLURM_STEP_NUM_NODES", "SLURM_NNODES"], "a whole number")?;
    Ok(nodes.is_some_and(|(_, nodes)| nodes == 1))
}

impl World {
    /// Reads the job from the launcher's environment; none means a job of one rank.
    pub fn from_env() -> Result<World> {
        let Some((launcher, rank, size)) = detect()? else {
            return Ok(World::alone());
        };
        let store = hvd_rendezvous::store_from_env(launcher, rank, size)?;
        let world = World {
            rank,
            size,
            launcher,
            store,
            local_size: local_size()?,
        };
        // Reaching the launcher's store is what "connected" means to it, whatever the
        // program does next (`hvd::init`, or a transport of its own).
        world.check_in();
        Ok(world)
    }

    /// The launcher's rank and size, with an in-process store: for transports that connect
    /// through the launcher's own machinery (MPI) and need no rendezvous.
    pub fn from_env_without_store() -> Result<World> {
        let Some((launcher, rank, size)) = detect()? else {
            return Ok(World::alone());
        };
        Ok(World {
            rank,
            size,
            launcher,
            store: Arc::new(MemoryStore::new()),
            local_size: local_size()?,
        })
    }

    /// A job of one rank, started by no launcher.
    fn alone() -> World {
        World {
            rank: 0,
            size: 1,
            launcher: "none",
            store: Arc::new(MemoryStore::new()),
            local_size: Some(1),
        }
    }

    /// Whether every rank of the job is on this host, as far as the launcher says (a
    /// rank alone is). Unknown counts as no: the transports for several hosts work on
    /// one too.
    pub fn on_one_host(&self) -> Result<bool> {
        Ok(self.size == 1 || self.local_size == Some(self.size) || one_slurm_node()?)
    }

    /// True when hvdrun started this process, statically or as an elastic worker.
    pub fn launched_by_hvdrun(&self) -> bool {
        self.launcher.starts_with("hvdrun")
    }

    /// True when an MPI launcher (Open MPI's or MPICH's mpirun) started this process.
    pub fn launched_by_mpi(&self) -> bool {
        matches!(self.launcher, "Open MPI" | "MPICH")
    }

    /// Tells the launcher this rank is connected: counts the rank in `hvd.checkin.<rank>`
    /// and, the first time, adds 1 to the counter `hvd.checkin`, which hvdrun watches while
    /// the job starts (so a rank that checks in twice, from `World::from_env` and again
    /// when it connects, counts once). Only for a job a launcher started; a failure here
    /// only costs the launcher's progress line, so it is logged and ignored.
    pub(crate) fn check_in(&self) {
        if self.launcher == "none" {
            return;
        }
        let key = hvd_rendezvous::checkin_key(self.rank);
        let result = self.store.add(&key, 1).and_then(|times| match times {
            1 => self.store.add(hvd_rendezvous::CHECKIN_KEY, 1).map(drop),
            _ => Ok(()),
        });
        if let Err(e) = result {
            tracing::debug!(
                rank = self.rank,
                "could not check in with the launcher: {e}"
            );
        }
    }
}

/// The transports connect through a `World` (their crates cannot name this type).
impl hvd_core::provider::Place for World {
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
        self.launcher
    }
    fn launched_by_mpi(&self) -> bool {
        World::launched_by_mpi(self)
    }
    fn on_one_host(&self) -> Result<bool> {
        World::on_one_host(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started_by_hvdrun(rank: usize, store: Arc<dyn Store>) -> World {
        World {
            rank,
            size: 2,
            launcher: "hvdrun",
            store,
            local_size: Some(2),
        }
    }

    fn counter(store: &dyn Store) -> String {
        let bytes = store.try_get(hvd_rendezvous::CHECKIN_KEY).unwrap().unwrap();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_rank_that_checks_in_twice_counts_once() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let first = started_by_hvdrun(0, store.clone());
        first.check_in();
        first.check_in();
        assert_eq!(counter(store.as_ref()), "1");
        started_by_hvdrun(1, store.clone()).check_in();
        assert_eq!(counter(store.as_ref()), "2");
    }
}
