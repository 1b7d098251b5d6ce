//! Jobs of several ranks as threads of one test, over the in-process reference transport.

#![allow(dead_code)]

use std::time::Duration;

use hvd::core::reference::LocalGroup;
use hvd::{Config, Hvd};

/// A configuration for tests: short cycles, and stall times long enough not to fire
/// unless a test wants them to.
pub fn config() -> Config {
    Config {
        cycle_time: Duration::from_millis(1),
        stall_check: Some(Duration::from_secs(20)),
        stall_shutdown: Some(Duration::from_secs(60)),
        ..Config::default()
    }
}

/// Runs `body` on every rank of an `n`-rank job (one thread each) and returns what each
/// rank returned, in rank order.
pub fn job<T: Send>(n: usize, config: Config, body: impl Fn(Hvd) -> T + Sync) -> Vec<T> {
    job_with_sets(n, config, vec![], body)
}

/// Like [`job`], with static process sets.
pub fn job_with_sets<T: Send>(
    n: usize,
    config: Config,
    sets: Vec<Vec<usize>>,
    body: impl Fn(Hvd) -> T + Sync,
) -> Vec<T> {
    run(LocalGroup::new(n), config, sets, body)
}

/// Like [`job`], with rank `r` on host `hosts[r]`.
pub fn job_on_hosts<T: Send>(
    hosts: Vec<u32>,
    config: Config,
    body: impl Fn(Hvd) -> T + Sync,
) -> Vec<T> {
    run(
        LocalGroup::new(hosts.len()).hosts(hosts),
        config,
        vec![],
        body,
    )
}

fn run<T: Send>(
    group: LocalGroup,
    config: Config,
    sets: Vec<Vec<usize>>,
    body: impl Fn(Hvd) -> T + Sync,
) -> Vec<T> {
    let group = group.timeout(Duration::from_secs(30)).build();
    std::thread::scope(|s| {
        let handles: Vec<_> = group
            .into_iter()
            .map(|collective| {
                let (config, sets, body) = (config.clone(), sets.clone(), &body);
                s.spawn(move || {
                    let hvd = hvd::Builder::new()
                        .collective(collective)
                        .config(config)
                        .process_sets(sets)
                        .build()
                        .expect("hvd starts");
                    body(hvd)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    })
}
