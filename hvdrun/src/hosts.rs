//! The hosts of a job and which ranks run on each.
//!
//! Hosts come as `-H host1:4,host2:4` or a hostfile (see `hostfile.rs`). Ranks fill
//! the hosts in order: the first host's slots take ranks 0, 1, ..., then the next host's.

use hvd_core::{Error, Result};

/// A host and how many ranks it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub slots: usize,
}

impl Host {
    /// `name` with `slots` ranks.
    pub fn new(name: impl Into<String>, slots: usize) -> Host {
        Host {
            name: name.into(),
            slots,
        }
    }

    /// Whether this names the machine the launcher runs on, whose ranks are started
    /// directly rather than over ssh.
    pub fn is_this_machine(&self) -> bool {
        let name = self.name.as_str();
        if matches!(name, "localhost" | "127.0.0.1" | "::1") {
            return true;
        }
        let own = hvd_core::net::hostname();
        name == own || own.split('.').next() == Some(name)
    }
}

/// Where one rank runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Index into the job's hosts.
    pub host: usize,
    pub local_rank: usize,
    /// How many of the job's ranks run on this host.
    pub local_size: usize,
}

fn slots(spec: &str, value: &str) -> Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::Config {
            name: "hosts".into(),
            value: spec.into(),
            expected: "a slot count of 1 or more, as in host1:4".into(),
        }),
    }
}

/// Splits `host:N` into the host and the count. An IPv6 address has colons of its own,
/// so it is written `[fd00::2]:4`, or bare for one slot.
pub(crate) fn split_slots(entry: &str) -> (&str, Option<&str>) {
    if let Some(rest) = entry.strip_prefix('[')
        && let Some((name, after)) = rest.split_once(']')
    {
        return (name, after.strip_prefix(':'));
    }
    match entry.split_once(':') {
        Some((name, count)) if !count.contains(':') => (name, Some(count)),
        _ => (entry, None),
    }
}

/// Parses `-H`: `host1:4,host2:4`; a host without `:N` has one slot.
pub fn parse_hosts(spec: &str) -> Result<Vec<Host>> {
    let hosts = spec
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|entry| {
            let (name, count) = split_slots(entry);
            if name.is_empty() {
                return Err(Error::Config {
                    name: "hosts".into(),
                    value: entry.into(),
                    expected: "a host name, as in host1:4".into(),
                });
            }
            Ok(Host {
                name: name.into(),
                slots: count.map_or(Ok(1), |c| slots(entry, c))?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if hosts.is_empty() {
        return Err(Error::Config {
            name: "hosts".into(),
            value: spec.into(),
            expected: "at least one host, as in host1:4,host2:4".into(),
        });
    }
    Ok(hosts)
}

/// Places `np` ranks on `hosts` in order; an error when they lack the slots.
pub fn place(hosts: &[Host], np: usize) -> Result<Vec<Placement>> {
    let total = hosts.iter().map(|h| h.slots).fold(0, usize::saturating_add);
    if np > total {
        let listed: Vec<String> = hosts
            .iter()
            .map(|h| format!("{}:{}", h.name, h.slots))
            .collect();
        return Err(Error::Config {
            name: "-np".into(),
            value: np.to_string(),
            expected: format!(
                "at most the {total} slots of the hosts ({}); add hosts or slots",
                listed.join(",")
            ),
        });
    }
    let mut placements = Vec::with_capacity(np);
    let mut left = np;
    for (index, host) in hosts.iter().enumerate() {
        let here = host.slots.min(left);
        placements.extend((0..here).map(|local_rank| Placement {
            host: index,
            local_rank,
            local_size: here,
        }));
        left -= here;
    }
    Ok(placements)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, slots: usize) -> Host {
        Host::new(name, slots)
    }

    #[test]
    fn hosts_with_and_without_slot_counts() {
        assert_eq!(
            parse_hosts("a:2, b ,[fd00::2]:3,10.0.0.1:1").unwrap(),
            vec![
                host("a", 2),
                host("b", 1),
                host("fd00::2", 3),
                host("10.0.0.1", 1)
            ]
        );
    }

    #[test]
    fn bad_host_lists_name_the_entry() {
        assert_eq!(
            parse_hosts("a:0").unwrap_err().to_string(),
            "invalid value \"a:0\" for hosts: expected a slot count of 1 or more, as in host1:4"
        );
        assert_eq!(
            parse_hosts(" , ").unwrap_err().to_string(),
            "invalid value \" , \" for hosts: expected at least one host, as in host1:4,host2:4"
        );
    }

    #[test]
    fn ranks_fill_hosts_in_order() {
        let placed = place(&[host("a", 2), host("b", 4)], 5).unwrap();
        let summary: Vec<(usize, usize, usize)> = placed
            .iter()
            .map(|p| (p.host, p.local_rank, p.local_size))
            .collect();
        assert_eq!(
            summary,
            vec![(0, 0, 2), (0, 1, 2), (1, 0, 3), (1, 1, 3), (1, 2, 3)]
        );
    }

    #[test]
    fn too_few_slots_is_an_error_listing_them() {
        assert_eq!(
            place(&[host("a", 2), host("b", 1)], 4)
                .unwrap_err()
                .to_string(),
            "invalid value \"4\" for -np: expected at most the 3 slots of the hosts (a:2,b:1); add hosts or slots"
        );
    }

    #[test]
    fn this_machine_is_recognised_by_name() {
        assert!(host("localhost", 1).is_this_machine());
        assert!(host(&hvd_core::net::hostname(), 1).is_this_machine());
        assert!(!host("192.0.2.77", 1).is_this_machine());
    }
}
