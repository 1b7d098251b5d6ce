//! Decode threads run below the training loop's priority (`LoaderOptions::priority`), so
//! the loop's own threads get a core at once on a busy host.
#![cfg(target_os = "linux")]

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hvd_data::{
    Augment, DecodePriority, ElasticSampler, Load, Loader, LoaderOptions, Synthetic, TuneLimits,
};

/// The tests read every decode thread of the process: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Linux's idle scheduling policy as `/proc` shows it.
const SCHED_IDLE: u32 = 5;

/// A thread's nice value and scheduling policy from its `/proc` stat line (the 19th and
/// 41st fields; the name in parentheses before them may hold spaces).
fn priority_of(stat: &str) -> (i32, u32) {
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    (fields[16].parse().unwrap(), fields[38].parse().unwrap())
}

/// The nice value and policy of every thread of this process whose name starts with
/// `prefix`.
fn priority_of_threads(prefix: &str) -> Vec<(i32, u32)> {
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
            found.push(priority_of(&stat));
        }
    }
    found
}

/// The decode threads' priorities once `threads` of them have set theirs to `expected`,
/// or what they showed after 10 s.
fn decoders_at(loader: &mut Loader, threads: usize, expected: (i32, u32)) -> Vec<(i32, u32)> {
    let sampler = ElasticSampler::new(64, 1);
    // Two threads and one batch ahead for 64 steps: the threads wait for the loop and
    // live until the epoch is dropped.
    let _epoch = loader.epoch(&sampler, 0, 1).unwrap();
    let started = Instant::now();
    loop {
        let seen = priority_of_threads("hvd-data-");
        let settled = seen.len() == threads && seen.iter().all(|p| *p == expected);
        if settled || started.elapsed() > Duration::from_secs(10) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn loader(priority: DecodePriority) -> Loader {
    let options = LoaderOptions {
        threads: 2,
        prefetch: 1,
        priority,
        ..Default::default()
    };
    Loader::new(Synthetic::new(64, 16, 16, 2), Augment::train(8), options).unwrap()
}

/// This thread's (the training loop's) nice value and policy.
fn ours() -> (i32, u32) {
    priority_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap())
}

#[test]
fn decode_threads_run_the_chosen_steps_below_the_loops_priority() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let (ours, policy) = ours();
    let lowered = ((ours + 7).min(19), policy);
    let seven = DecodePriority::Nice(7);
    assert_eq!(
        decoders_at(&mut loader(seven), 2, lowered),
        vec![lowered; 2]
    );
    // The next epoch's threads start again from the loop's priority.
    let mut again = loader(seven);
    assert_eq!(decoders_at(&mut again, 2, lowered), vec![lowered; 2]);
    assert_eq!(decoders_at(&mut again, 2, lowered), vec![lowered; 2]);
    let same = (ours, policy);
    let mut equal = loader(DecodePriority::Nice(0));
    assert_eq!(decoders_at(&mut equal, 2, same), vec![same; 2]);
    let idle = (ours, SCHED_IDLE);
    let mut idle_loader = loader(DecodePriority::Idle);
    assert_eq!(decoders_at(&mut idle_loader, 2, idle), vec![idle; 2]);
}

#[test]
fn auto_decoders_idle_until_a_tuning_finds_the_rank_behind() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let (ours, policy) = ours();
    assert_eq!(LoaderOptions::default().priority, DecodePriority::Nice(10));
    let mut auto = loader(DecodePriority::Auto);
    assert_eq!(auto.decode_priority(), DecodePriority::Idle);
    let idle = (ours, SCHED_IDLE);
    assert_eq!(decoders_at(&mut auto, 2, idle), vec![idle; 2]);
    // A batch takes 8 ms on one thread, a step 1 ms, and the rank has one core: behind.
    let short = Load {
        seconds_per_image: 1e-3,
        batch_images: 8.0,
        step_seconds: 1e-3,
        batch_bytes: 1024,
    };
    assert!(!auto.tune(short, TuneLimits::even(1, 1)).keeps_up());
    assert_eq!(auto.decode_priority(), DecodePriority::Nice(10));
    let nice = ((ours + 10).min(19), policy);
    assert_eq!(decoders_at(&mut auto, 1, nice), vec![nice; 1]);
    // A step of 8.9 ms: one thread (1000 images/s) just keeps up with 900 images/s, not
    // by enough for a rank that was behind to idle again.
    let close = Load {
        step_seconds: 8.0 / 900.0,
        ..short
    };
    assert!(auto.tune(close, TuneLimits::even(1, 1)).keeps_up());
    assert_eq!(decoders_at(&mut auto, 1, nice), vec![nice; 1]);
    // A step of 100 ms: well ahead, and the decoders idle again.
    let fed = Load {
        step_seconds: 0.1,
        ..short
    };
    assert!(auto.tune(fed, TuneLimits::even(1, 1)).keeps_up());
    assert_eq!(decoders_at(&mut auto, 1, idle), vec![idle; 1]);
}
