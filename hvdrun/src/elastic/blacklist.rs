//! Which hosts are kept out of an elastic job for now, after failing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hvd_core::units::MAX_DURATION;

/// Hosts that failed, each kept out for a cooldown that doubles with every failure,
/// from the least to the most of the range: a host that fails once returns soon, one
/// that keeps failing waits longer and longer, and none is kept out for good.
#[derive(Debug, Clone)]
pub struct Blacklist {
    cooldown: (Duration, Duration),
    hosts: BTreeMap<String, Charge>,
}

#[derive(Debug, Clone, Copy)]
struct Charge {
    failures: u32,
    until: Instant,
}

impl Blacklist {
    /// Cooldowns from `least` to `most`.
    pub fn new(least: Duration, most: Duration) -> Self {
        Blacklist {
            cooldown: (least, most.max(least)),
            hosts: BTreeMap::new(),
        }
    }

    /// Charges `host` with a failure at `now`; returns how long it is kept out.
    pub fn charge(&mut self, host: &str, now: Instant) -> Duration {
        let failures = self.hosts.get(host).map_or(0, |c| c.failures) + 1;
        let (least, most) = self.cooldown;
        let doubled = least.saturating_mul(1u32 << (failures - 1).min(30));
        let cooldown = doubled.min(most);
        self.hosts.insert(
            host.to_owned(),
            Charge {
                failures,
                until: now + cooldown.min(MAX_DURATION),
            },
        );
        cooldown
    }

    /// Whether `host` is kept out at `now`.
    pub fn blocks(&self, host: &str, now: Instant) -> bool {
        self.hosts.get(host).is_some_and(|c| now < c.until)
    }

    /// The hosts whose cooldown ended between `since` and `now`: readmitted.
    pub fn readmitted(&self, since: Instant, now: Instant) -> Vec<String> {
        self.hosts
            .iter()
            .filter(|(_, c)| since <= c.until && c.until < now)
            .map(|(host, _)| host.clone())
            .collect()
    }

    /// `host`'s standing, in words, for messages.
    pub fn describe(&self, host: &str, now: Instant) -> Option<String> {
        let charge = self.hosts.get(host)?;
        let times = match charge.failures {
            1 => "once".to_string(),
            n => format!("{n} times"),
        };
        Some(if now < charge.until {
            format!(
                "blacklisted for {:.1}s more (failed {times})",
                (charge.until - now).as_secs_f64()
            )
        } else {
            format!("failed {times}, cooldown over")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooldowns_double_within_the_range_and_hosts_return() {
        let secs = Duration::from_secs;
        let mut list = Blacklist::new(secs(2), secs(5));
        let t0 = Instant::now();
        assert_eq!(list.charge("a", t0), secs(2));
        assert!(list.blocks("a", t0 + secs(1)) && !list.blocks("b", t0));
        assert!(!list.blocks("a", t0 + secs(2)));
        assert_eq!(list.readmitted(t0 + secs(1), t0 + secs(3)), ["a"]);
        assert_eq!(list.charge("a", t0), secs(4));
        assert_eq!(list.charge("a", t0), secs(5), "capped at the most");
        assert_eq!(
            list.describe("a", t0 + secs(1)).unwrap(),
            "blacklisted for 4.0s more (failed 3 times)"
        );
        assert_eq!(list.describe("b", t0), None);
    }
}
