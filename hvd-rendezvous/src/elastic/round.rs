//! Forming a round: which workers, in which rank order, with which places. What every
//! elastic driver decides the same way: hvdrun's, and the one of a job on Ray.

use super::Assignment;

/// A worker a round may include: its id (`host:slot`) and its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: String,
    pub host: String,
}

/// The members of the next round, in rank order: the previous round's survivors in
/// their order (so ranks move as little as they can), then the newcomers in theirs; at
/// most `max` in all.
pub fn order(survivors: &[Candidate], newcomers: &[Candidate], max: usize) -> Vec<Candidate> {
    survivors
        .iter()
        .chain(newcomers)
        .take(max)
        .cloned()
        .collect()
}

/// Each member's place: its rank, its local rank among the members of its host, and
/// its host's cross rank in order of first appearance. `updates` is the count of host
/// changes the round is formed with.
pub fn assign(members: &[Candidate], updates: u64) -> Vec<(String, Assignment)> {
    let mut hosts: Vec<&str> = Vec::new();
    for member in members {
        if !hosts.contains(&member.host.as_str()) {
            hosts.push(&member.host);
        }
    }
    members
        .iter()
        .enumerate()
        .map(|(rank, member)| {
            let same_host = |m: &&Candidate| m.host == member.host;
            let assignment = Assignment {
                rank,
                size: members.len(),
                local_rank: members[..rank].iter().filter(same_host).count(),
                local_size: members.iter().filter(same_host).count(),
                cross_rank: hosts.iter().position(|h| *h == member.host).unwrap_or(0),
                cross_size: hosts.len(),
                updates,
            };
            (member.id.clone(), assignment)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: &str, slot: usize) -> Candidate {
        Candidate {
            id: format!("{host}:{slot}"),
            host: host.into(),
        }
    }

    #[test]
    fn survivors_keep_their_order_and_newcomers_follow() {
        let survivors = [at("b", 0), at("b", 1), at("c", 0)];
        let newcomers = [at("a", 0), at("a", 1)];
        let ids: Vec<String> = order(&survivors, &newcomers, 4)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, ["b:0", "b:1", "c:0", "a:0"]);
    }

    #[test]
    fn places_group_by_host() {
        let members = [at("b", 0), at("b", 1), at("c", 0), at("a", 0)];
        let places = assign(&members, 7);
        let (id, a) = &places[1];
        assert_eq!(id, "b:1");
        assert_eq!(
            (
                a.rank,
                a.size,
                a.local_rank,
                a.local_size,
                a.cross_rank,
                a.cross_size,
                a.updates
            ),
            (1, 4, 1, 2, 0, 3, 7)
        );
        let (_, last) = &places[3];
        assert_eq!(
            (last.local_rank, last.local_size, last.cross_rank),
            (0, 1, 2)
        );
    }
}
