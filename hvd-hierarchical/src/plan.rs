//! Which hierarchical scheme a job's layout allows, and the groups it needs: pure
//! functions of the ranks' hosts, the same on every rank.

use hvd_core::Topology;

/// How the ranks of a job are spread over hosts, for a hierarchical allreduce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// Every host has `local_size` ranks: reducescatter within the host, allreduce of
    /// each shard among the ranks with the same local rank (one per host), allgather
    /// within the host. Every link carries 1/local_size of the data.
    Uniform { local_size: usize },
    /// Hosts have different numbers of ranks: allreduce within the host, allreduce
    /// among the hosts' first ranks (the leaders), broadcast within the host.
    Leaders,
}

impl Scheme {
    pub(crate) fn of(topology: &Topology) -> Scheme {
        let hosts = topology.hosts();
        let local_size = topology.local_size();
        let uniform = hosts
            .iter()
            .all(|h| hosts.iter().filter(|other| *other == h).count() == local_size);
        if uniform {
            Scheme::Uniform { local_size }
        } else {
            Scheme::Leaders
        }
    }

    /// The cross groups to create, in the order every rank creates them: for
    /// `Uniform`, one per local rank (ranks with that local rank, in rank order); for
    /// `Leaders`, the first rank of each host.
    pub(crate) fn cross_groups(&self, topology: &Topology) -> Vec<Vec<usize>> {
        let local_rank_of =
            |r: usize| Topology::from_hosts(r, topology.hosts().to_vec()).local_rank();
        match self {
            Scheme::Uniform { local_size } => (0..*local_size)
                .map(|lr| {
                    (0..topology.size())
                        .filter(|r| local_rank_of(*r) == lr)
                        .collect()
                })
                .collect(),
            Scheme::Leaders => vec![
                (0..topology.size())
                    .filter(|r| local_rank_of(*r) == 0)
                    .collect(),
            ],
        }
    }
}

/// Elements of `count` given to each of `parts` shards: as even as possible, the first
/// shards one larger.
pub(crate) fn shard_counts(count: usize, parts: usize) -> Vec<usize> {
    let parts = parts.max(1);
    (0..parts)
        .map(|p| count / parts + usize::from(p < count % parts))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_hosts_get_one_cross_group_per_local_rank() {
        // Hosts 0 and 1 interleaved: ranks 0, 2 on host 0; 1, 3 on host 1.
        let topology = Topology::from_hosts(0, vec![0, 1, 0, 1]);
        let scheme = Scheme::of(&topology);
        assert_eq!(scheme, Scheme::Uniform { local_size: 2 });
        assert_eq!(scheme.cross_groups(&topology), vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn unequal_hosts_fall_back_to_leaders() {
        let topology = Topology::from_hosts(2, vec![0, 0, 0, 1]);
        let scheme = Scheme::of(&topology);
        assert_eq!(scheme, Scheme::Leaders);
        assert_eq!(scheme.cross_groups(&topology), vec![vec![0, 3]]);
    }

    #[test]
    fn shards_cover_the_tensor_and_differ_by_at_most_one() {
        assert_eq!(shard_counts(10, 4), [3, 3, 2, 2]);
        assert_eq!(shard_counts(2, 4), [1, 1, 0, 0]);
        assert_eq!(shard_counts(0, 3), [0, 0, 0]);
        assert_eq!(shard_counts(7, 1), [7]);
    }
}
