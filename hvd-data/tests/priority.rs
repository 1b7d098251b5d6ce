//! Decode threads run below the training loop's priority by `LoaderOptions::nice` steps,
//! so the loop's own threads get a core at once on a busy host.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use hvd_data::{Augment, ElasticSampler, Loader, LoaderOptions, Synthetic};

/// A thread's nice value from its `/proc` stat line (the 19th field; the name in
/// parentheses before it may hold spaces).
fn nice_of(stat: &str) -> i32 {
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(16).unwrap().parse().unwrap()
}

/// The nice value of every thread of this process whose name starts with `prefix`.
fn nice_of_threads(prefix: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("stat")),
        ) else {
            continue; // a thread that ended meanwhile
        };
        if name.starts_with(prefix) {
            found.push(nice_of(&stat));
        }
    }
    found
}

/// The decode threads' nice values once `threads` of them have set their priority, or
/// what they showed after 10 s.
fn decoders_at(loader: &mut Loader, threads: usize, expected: i32) -> Vec<i32> {
    let sampler = ElasticSampler::new(64, 1);
    // Two threads and one batch ahead for 64 steps: the threads wait for the loop and
    // live until the epoch is dropped.
    let _epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let started = Instant::now();
    loop {
        let seen = nice_of_threads("hvd-data-");
        let settled = seen.len() == threads && seen.iter().all(|n| *n == expected);
        if settled || started.elapsed() > Duration::from_secs(10) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn decode_threads_run_the_chosen_steps_below_the_loops_priority() {
    let ours = nice_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
    let loader = |nice| {
        let options = LoaderOptions {
            threads: 2,
            prefetch: 1,
            nice,
            ..Default::default()
        };
        Loader::new(Synthetic::new(64, 16, 16, 2), Augment::train(8), options).unwrap()
    };
    assert_eq!(LoaderOptions::default().nice, 10);
    let lowered = (ours + 7).min(19);
    assert_eq!(decoders_at(&mut loader(7), 2, lowered), vec![lowered; 2]);
    // The next epoch's threads start again from the loop's priority.
    let mut again = loader(7);
    assert_eq!(decoders_at(&mut again, 2, lowered), vec![lowered; 2]);
    assert_eq!(decoders_at(&mut again, 2, lowered), vec![lowered; 2]);
    assert_eq!(decoders_at(&mut loader(0), 2, ours), vec![ours; 2]);
}
