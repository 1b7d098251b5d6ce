//! The elastic tests' training job: linear regression by SGD on a synthetic dataset,
//! global batch fixed whatever the job's size, a commit every few steps. Its state
//! (weights, the sampler's place, the step count, and the log of every example index
//! committed) lives in a `TensorState`, so what survives a failure is exactly what was
//! committed. Faults are injected by `ELASTIC_FAULT`; every worker writes a report.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use hvd::ReduceOp;
use hvd::core::rng::SplitMix64;
use hvd::elastic::{self, ElasticSampler, State, TensorState};

pub const EXAMPLES: usize = 512;
pub const FEATURES: usize = 8;
pub const GLOBAL_BATCH: usize = 16;
pub const EPOCHS: u64 = 2;
pub const COMMIT_EVERY: u64 = 4;
const LEARNING_RATE: f64 = 0.05;
const SEED: u64 = 11;

/// Example `i`: its features and target, the same on every rank.
fn example(i: usize) -> ([f64; FEATURES], f64) {
    let mut rng = SplitMix64::new(0x5eed ^ i as u64);
    let mut x = [0.0; FEATURES];
    for v in &mut x {
        *v = rng.next_f64() * 2.0 - 1.0;
    }
    let truth: f64 = x
        .iter()
        .enumerate()
        .map(|(k, v)| (k as f64 - 3.5) * v)
        .sum();
    (x, truth + (rng.next_f64() - 0.5) * 0.1)
}

/// The summed gradient of the squared error over `indices`, at `w`.
fn gradient(w: &[f64], indices: &[usize]) -> Vec<f64> {
    let mut g = vec![0.0; FEATURES];
    for &i in indices {
        let (x, y) = example(i);
        let err: f64 = x.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() - y;
        for (gk, xk) in g.iter_mut().zip(x) {
            *gk += err * xk;
        }
    }
    g
}

fn step(w: &mut [f64], summed: &[f64], batch: usize) {
    for (wk, gk) in w.iter_mut().zip(summed) {
        *wk -= LEARNING_RATE * gk / batch as f64;
    }
}

/// The weights the same job reaches in one process.
pub fn reference() -> Vec<f64> {
    let mut w = vec![0.0; FEATURES];
    let mut sampler = ElasticSampler::new(EXAMPLES, GLOBAL_BATCH).seed(Some(SEED));
    for epoch in 0..EPOCHS {
        sampler.set_epoch(epoch);
        while !sampler.epoch_done() {
            let batch = sampler.next_global_batch().to_vec();
            let summed = gradient(&w, &batch);
            step(&mut w, &summed, batch.len());
            sampler.advance();
        }
    }
    w
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn out_dir() -> PathBuf {
    PathBuf::from(std::env::var("ELASTIC_OUT").expect("ELASTIC_OUT"))
}

/// Appends a line; one write, so lines of workers appending at once never mix.
fn append(path: &Path, line: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// Does what `ELASTIC_FAULT` (a comma-separated list) asks this worker to do at
/// `step` of `round`; `false` when it asks for a wrong shape.
///
/// - `kill-host:<host>:<step>`: every worker of the host dies, as when the machine fails;
/// - `kill-slot:<host>:<slot>:<step>`: that slot's worker dies;
/// - `fail-on-join:<host>`: the host's workers fail on every round's first step;
/// - `mismatch:<step>`: rank 1 submits another shape, a bug and not a lost host;
/// - `die-in-sync:<host>:<n>` (see [`Faulty`]).
fn inject(faults: &str, host: &str, slot: &str, step: u64, round: u64, rank: usize) -> bool {
    let die = || {
        append(
            &out_dir().join("events"),
            &format!("killed {host} {}", now_ms()),
        );
        // SAFETY: raise(3) has no memory-safety preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
    };
    for fault in faults.split(',').filter(|f| !f.is_empty()) {
        let words: Vec<&str> = fault.split(':').collect();
        let at = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok());
        match words.as_slice() {
            ["kill-host", victim, _] if *victim == host && at(2) == Some(step) => die(),
            ["kill-slot", victim, number, _]
                if slot.starts_with(&format!("{victim}:{number}.")) && at(3) == Some(step) =>
            {
                die()
            }
            ["fail-on-join", victim] if *victim == host && round > 0 => {
                eprintln!("worker {slot}: failing on joining round {round}");
                std::process::exit(3);
            }
            ["mismatch", _] if at(1) == Some(step) && rank == 1 => return false,
            _ => {}
        }
    }
    true
}

/// The job's state, which can also kill its host's workers when they start their
/// `n`-th round, before the state is synced: `ELASTIC_FAULT=die-in-sync:<host>:<n>`.
struct Faulty {
    state: TensorState,
    fault: String,
    host: String,
    rounds: u64,
}

impl State for Faulty {
    fn save(&mut self) -> hvd::Result<()> {
        self.state.save()
    }
    fn restore(&mut self) -> hvd::Result<()> {
        self.state.restore()
    }
    fn sync(&mut self, hvd: &hvd::Hvd, root: usize) -> hvd::Result<()> {
        self.state.sync(hvd, root)
    }
    fn reset(&mut self, hvd: &hvd::Hvd) -> hvd::Result<()> {
        self.rounds += 1;
        let dies = self.fault.split(',').any(|fault| {
            let words: Vec<&str> = fault.split(':').collect();
            matches!(words.as_slice(), ["die-in-sync", victim, n]
                if *victim == self.host && n.parse() == Ok(self.rounds))
        });
        if dies {
            append(
                &out_dir().join("events"),
                &format!("killed {} {}", self.host, now_ms()),
            );
            // SAFETY: raise(3) has no memory-safety preconditions.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        self.state.reset(hvd)
    }
}

/// The worker: trains under `hvd::elastic::run` and reports.
pub fn worker() {
    let host = std::env::var("HVD_HOSTNAME").unwrap_or_default();
    let slot = std::env::var("HVD_ELASTIC_WORKER").unwrap_or_default();
    let fault = std::env::var("ELASTIC_FAULT").unwrap_or_default();
    // Slows the steps, so that the tests of changing hosts see the job train.
    let pause = std::env::var("ELASTIC_STEP_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(std::time::Duration::from_millis);
    let out = out_dir();
    let mut state = Faulty {
        state: TensorState::new(),
        fault: fault.clone(),
        host: host.clone(),
        rounds: 0,
    };
    state.state.set("w", &[0.0f64; FEATURES]);
    let mut sampler = ElasticSampler::new(EXAMPLES, GLOBAL_BATCH).seed(Some(SEED));
    let mut executed = 0u64;
    let result = elastic::run(&mut state, |ctx, faulty| {
        let hvd = ctx.hvd().clone();
        let (rank, size) = (hvd.rank(), hvd.size());
        sampler.load_from(&faulty.state, "sampler");
        let mut w: Vec<f64> = faulty.state.get("w").expect("weights");
        let mut log: Vec<i64> = faulty.state.get("log").unwrap_or_default();
        let mut steps = faulty.state.get_u64("steps").unwrap_or(0);
        append(
            &out.join("rounds"),
            &format!("{} {} {size} {rank} {slot} {steps}", ctx.round(), now_ms()),
        );
        loop {
            if sampler.epoch_done() {
                if sampler.epoch() + 1 >= EPOCHS {
                    break;
                }
                sampler.set_epoch(sampler.epoch() + 1);
            }
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            let mine = sampler.next_batch(rank, size).to_vec();
            let mut grad = gradient(&w, &mine);
            if !inject(&fault, &host, &slot, steps, ctx.round(), rank) {
                grad.push(0.0);
            }
            let summed = hvd.allreduce("grad", grad, ReduceOp::Sum)?;
            let batch = sampler.next_global_batch();
            step(&mut w, &summed, batch.len());
            let epoch = sampler.epoch() as i64;
            log.extend(batch.iter().map(|i| epoch * EXAMPLES as i64 + *i as i64));
            sampler.advance();
            steps += 1;
            executed += 1;
            let last = sampler.epoch_done() && sampler.epoch() + 1 >= EPOCHS;
            if steps.is_multiple_of(COMMIT_EVERY) || last {
                faulty.state.set("w", &w);
                faulty.state.set("log", &log);
                faulty.state.set_u64("steps", steps);
                sampler.save_to(&mut faulty.state, "sampler");
                ctx.commit(faulty)?;
            }
        }
        Ok((rank, w, log, steps))
    });
    let report = match result {
        Ok(Some((rank, w, log, steps))) => {
            if rank == 0 {
                let bits: Vec<String> = w.iter().map(|v| v.to_bits().to_string()).collect();
                let log: Vec<String> = log.iter().map(i64::to_string).collect();
                std::fs::write(
                    out.join("final"),
                    format!("{}\n{}\n{steps}\n", bits.join(" "), log.join(" ")),
                )
                .unwrap();
            }
            format!("finished executed {executed}")
        }
        Ok(None) => format!("removed executed {executed}"),
        Err(e) => {
            append(&out.join("errors"), &format!("{slot}: {e}"));
            eprintln!("worker {slot}: {e}");
            std::process::exit(1);
        }
    };
    append(&out.join("workers"), &format!("{slot} {report}"));
}

/// The final state the job committed: weights, example log, steps.
pub struct Final {
    pub w: Vec<f64>,
    pub log: Vec<i64>,
    pub steps: u64,
}

pub fn read_final(out: &Path) -> Final {
    let text = std::fs::read_to_string(out.join("final")).expect("rank 0 wrote the final state");
    let lines: Vec<&str> = text.lines().collect();
    Final {
        w: lines[0]
            .split(' ')
            .map(|b| f64::from_bits(b.parse().unwrap()))
            .collect(),
        log: lines[1].split(' ').map(|i| i.parse().unwrap()).collect(),
        steps: lines[2].parse().unwrap(),
    }
}

/// Every example exactly once per epoch, and the weights of the one-process run.
pub fn check_final(out: &Path) -> Final {
    let done = read_final(out);
    let mut log = done.log.clone();
    log.sort_unstable();
    let expected: Vec<i64> = (0..EPOCHS as i64 * EXAMPLES as i64).collect();
    assert!(
        log == expected,
        "each example exactly once per epoch: {} logged",
        done.log.len()
    );
    let reference = reference();
    for (k, (got, want)) in done.w.iter().zip(&reference).enumerate() {
        let relative = ((got - want) / want).abs();
        assert!(
            relative < 1e-9,
            "weight {k}: {got} against {want} in one process ({relative:e})"
        );
    }
    done
}

/// The lines of a file the workers appended to, or none.
pub fn lines(out: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(out.join(name))
        .map(|t| t.lines().map(String::from).collect())
        .unwrap_or_default()
}
