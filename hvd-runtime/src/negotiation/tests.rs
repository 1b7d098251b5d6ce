//! Negotiation alone, over the in-process reference transport: requests in, responses
//! out, with no executor and no tensors.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd_core::reference::{LocalCollective, LocalGroup};
use hvd_core::{Compression, DType, ReduceOp, Reduction};

use super::{Negotiation, Setup};
use crate::request::{Op, Request};
use crate::speculate::Cargo;

/// Rounds a test may run before it fails: every exchange here settles in a few.
const MAX_ROUNDS: usize = 20;

fn negotiation(control: LocalCollective) -> Negotiation {
    Negotiation::new(Setup {
        control: Arc::new(control),
        stats: Arc::default(),
        recorder: Arc::default(),
        cache_capacity: 16,
        stall_check: None,
        stall_shutdown: None,
    })
}

fn allreduce(name: &str) -> Request {
    let op = Op::Allreduce {
        reduction: Reduction::new(ReduceOp::Sum),
        compression: Compression::None,
    };
    Request::new(name, op, DType::F32, vec![4])
}

/// What one round gave: the responses to run, and the names whose data landed in it.
struct Outcome {
    responses: Vec<String>,
    landed: Vec<String>,
    data: Vec<f32>,
}

/// One round; `load` plays the executor with the cargo, when the round carries one.
fn round(n: &mut Negotiation, load: impl FnOnce(&mut Cargo)) -> Outcome {
    let mut round = n.open(false, false, None);
    if let Some(cargo) = round.cargo() {
        load(cargo);
    }
    let rode = n.exchange(&mut round).expect("the exchange");
    let cargo = round.take_cargo();
    let agreement = n.conclude(round).expect("the conclusion");
    let landed = cargo.as_ref().is_some_and(|c| c.landed);
    assert_eq!(landed, !rode.is_empty(), "what rode is what landed");
    Outcome {
        responses: agreement
            .responses
            .iter()
            .map(|r| r.name.to_string())
            .collect(),
        landed: rode.iter().map(|r| r.name.to_string()).collect(),
        data: cargo.map_or_else(Vec::new, |c| {
            c.data
                .chunks_exact(4)
                .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        }),
    }
}

/// Runs `rank` on its own thread for each member of a group of `size`.
fn ranks<T: Send + 'static>(
    size: usize,
    rank: impl Fn(usize, Negotiation) -> T + Send + Sync + Copy + 'static,
) -> Vec<T> {
    let threads: Vec<_> = LocalGroup::new(size)
        .timeout(Duration::from_secs(120))
        .build()
        .into_iter()
        .enumerate()
        .map(|(r, control)| std::thread::spawn(move || rank(r, negotiation(control))))
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a rank's thread"))
        .collect()
}

#[test]
fn ranks_reach_the_same_responses_in_the_same_order_whatever_order_they_submit() {
    let orders = ranks(2, |rank, mut n| {
        let names = if rank == 0 {
            ["a", "b", "c"]
        } else {
            ["c", "a", "b"]
        };
        for name in names {
            n.accept(allreduce(name), Instant::now());
        }
        assert_eq!(n.waiting(), 3);
        let mut agreed = Vec::new();
        for _ in 0..MAX_ROUNDS {
            agreed.extend(round(&mut n, |_| {}).responses);
            if agreed.len() == 3 {
                break;
            }
        }
        assert_eq!(n.waiting(), 0, "every request was answered");
        agreed
    });
    assert_eq!(orders[0].len(), 3, "{orders:?}");
    assert_eq!(orders[0], orders[1]);
}

/// Submits `g` and runs rounds until it is answered, the executor's part played by
/// `load` (`None`: this rank does not load the cargo). Returns how it was answered.
fn step(n: &mut Negotiation, load: Option<f32>) -> Outcome {
    n.accept(allreduce("g"), Instant::now());
    for _ in 0..MAX_ROUNDS {
        let outcome = round(n, |cargo| {
            if let Some(value) = load.filter(|_| cargo.all_waiting) {
                cargo
                    .data
                    .copy_from_slice(bytemuck::cast_slice(&[value; 4]));
                cargo.ready = true;
            }
        });
        if !outcome.responses.is_empty() || !outcome.landed.is_empty() {
            return outcome;
        }
    }
    panic!("'g' was not answered within {MAX_ROUNDS} rounds");
}

#[test]
fn a_repeating_cached_allreduce_rides_the_round_and_lands_only_when_every_rank_loads_it() {
    let steps = ranks(2, |rank, mut n| {
        let value = rank as f32 + 1.0;
        let mut steps = Vec::new();
        // Announced, then twice from the cache: the set repeats, so the ranks expect it.
        for _ in 0..3 {
            steps.push(step(&mut n, Some(value)));
        }
        // Every rank loads its data: it lands, summed.
        steps.push(step(&mut n, Some(value)));
        // Rank 1 does not: the data is dropped and the cached response runs as usual.
        steps.push(step(&mut n, (rank == 0).then_some(value)));
        steps
    });
    for (rank, steps) in steps.iter().enumerate() {
        for (i, s) in steps[..3].iter().enumerate() {
            assert_eq!(
                (&s.responses[..], s.landed.len()),
                (&["g".to_owned()][..], 0),
                "rank {rank}, step {i}"
            );
        }
        assert_eq!(steps[3].landed, ["g"], "rank {rank}");
        assert!(steps[3].responses.is_empty(), "rank {rank}: it ran once");
        assert_eq!(
            steps[3].data, [3.0; 4],
            "rank {rank}: the sum of both ranks' data"
        );
        assert_eq!(steps[4].responses, ["g"], "rank {rank}");
        assert!(steps[4].landed.is_empty(), "rank {rank}");
    }
}
