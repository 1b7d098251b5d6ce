//! Who is where: a rank's position in the job and on its host.

use std::sync::Arc;

/// The shape of a group of ranks, as Horovod exposes it.
///
/// *Local* ranks share a host. The *cross* group of a rank is every rank with the same
/// local rank (one per host in a homogeneous job), the group hierarchical algorithms use
/// between hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    rank: usize,
    /// Host index of every rank, in rank order.
    hosts: Arc<[u32]>,
}

impl Topology {
    /// A group of `size` ranks on one host.
    pub fn single_host(rank: usize, size: usize) -> Self {
        Topology::from_hosts(rank, vec![0; size])
    }

    /// A group whose rank `r` runs on host `hosts[r]` (any stable host numbering).
    pub fn from_hosts(rank: usize, hosts: Vec<u32>) -> Self {
        assert!(
            rank < hosts.len(),
            "rank {rank} outside a group of {}",
            hosts.len()
        );
        Topology {
            rank,
            hosts: hosts.into(),
        }
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.hosts.len()
    }

    /// Host index of every rank.
    pub fn hosts(&self) -> &[u32] {
        &self.hosts
    }

    /// This rank's index among the ranks on its host.
    pub fn local_rank(&self) -> usize {
        let host = self.hosts[self.rank];
        self.hosts[..self.rank]
            .iter()
            .filter(|h| **h == host)
            .count()
    }

    /// Number of ranks on this rank's host.
    pub fn local_size(&self) -> usize {
        let host = self.hosts[self.rank];
        self.hosts.iter().filter(|h| **h == host).count()
    }

    /// The ranks (in the job) with the same local rank as this one, in rank order.
    pub fn cross_group(&self) -> Vec<usize> {
        let local = self.local_rank();
        (0..self.size())
            .filter(|r| Topology::from_hosts(*r, self.hosts.to_vec()).local_rank() == local)
            .collect()
    }

    /// This rank's index in its cross group.
    pub fn cross_rank(&self) -> usize {
        let group = self.cross_group();
        group.iter().position(|r| *r == self.rank).unwrap_or(0)
    }

    /// Size of this rank's cross group.
    pub fn cross_size(&self) -> usize {
        self.cross_group().len()
    }

    /// True when every rank runs on one host.
    pub fn is_single_host(&self) -> bool {
        self.hosts.iter().all(|h| *h == self.hosts[0])
    }

    /// The topology of a sub-group made of `members` (ranks of this group, in the order
    /// that becomes the sub-group's rank order), seen from this rank; `None` when this rank
    /// is not a member.
    pub fn subgroup(&self, members: &[usize]) -> Option<Topology> {
        let rank = members.iter().position(|m| *m == self.rank)?;
        let hosts = members.iter().map(|m| self.hosts[*m]).collect();
        Some(Topology::from_hosts(rank, hosts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_hosts_of_two_ranks_give_horovods_local_and_cross_ranks() {
        // ranks 0,1 on host A; ranks 2,3 on host B
        let hosts = vec![7, 7, 9, 9];
        let t: Vec<_> = (0..4)
            .map(|r| Topology::from_hosts(r, hosts.clone()))
            .collect();
        let local: Vec<_> = t.iter().map(|t| (t.local_rank(), t.local_size())).collect();
        let cross: Vec<_> = t.iter().map(|t| (t.cross_rank(), t.cross_size())).collect();
        assert_eq!(local, [(0, 2), (1, 2), (0, 2), (1, 2)]);
        assert_eq!(cross, [(0, 2), (0, 2), (1, 2), (1, 2)]);
        assert_eq!(t[3].cross_group(), [1, 3]);
        assert!(!t[0].is_single_host());
    }

    #[test]
    fn subgroup_renumbers_members_in_the_given_order() {
        let t = Topology::from_hosts(2, vec![0, 0, 1, 1]);
        let sub = t.subgroup(&[3, 2]).unwrap();
        assert_eq!((sub.rank(), sub.size(), sub.hosts()), (1, 2, &[1, 1][..]));
        assert_eq!(t.subgroup(&[0, 1]), None);
    }
}
