//! Splitting every rank's steps into their four parts, and charging the job's wait to
//! the rank whose data was late.

use std::fmt;

use super::StepTimes;
use crate::{Error, Result};

/// One rank's epoch, split into four parts that add up to `wall` (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RankParts {
    /// Waiting for the next batch.
    pub data: f64,
    /// Outside collectives and not waiting for data.
    pub compute: f64,
    /// In collectives, after the last rank arrived.
    pub own_comm: f64,
    /// In collectives, waiting for the last rank to arrive.
    pub waiting: f64,
    /// The sum of the rank's step wall times.
    pub wall: f64,
    /// The job's time lost to data in the steps where this rank arrived last.
    pub charged: f64,
    /// Steps where this rank arrived last and its data wait delayed the job.
    pub late_steps: usize,
}

impl RankParts {
    /// The four parts' sum minus the wall time (zero but for rounding; a step whose
    /// waits overran its wall time, which a clock used as documented never records, is
    /// the exception).
    pub fn unaccounted(&self) -> f64 {
        self.wall - (self.data + self.compute + self.own_comm + self.waiting)
    }
}

/// The job's epoch, attributed: see the [module](super) for how.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StallReport {
    /// Steps in the epoch (every rank's).
    pub steps: usize,
    /// The epoch's wall time: the ranks' mean wall time per step, summed.
    pub wall: f64,
    /// The part of `wall` the job would not have spent without waits for data.
    pub data_lost: f64,
    /// Each rank's parts, in rank order.
    pub ranks: Vec<RankParts>,
}

impl StallReport {
    /// The share of the epoch lost to data, 0 to 1.
    pub fn data_bound(&self) -> f64 {
        if self.wall > 0.0 {
            self.data_lost / self.wall
        } else {
            0.0
        }
    }

    /// The rank charged with most of the loss, if any was lost.
    pub fn culprit(&self) -> Option<usize> {
        self.ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| r.charged > 0.0)
            .max_by(|a, b| a.1.charged.total_cmp(&b.1.charged))
            .map(|(rank, _)| rank)
    }
}

/// `data-bound 23 % of the epoch: rank 3 waited for data 41 % of its time, last to the
/// allreduce in 17 of 40 steps`.
impl fmt::Display for StallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let percent = |x: f64| (x * 100.0).round();
        write!(
            f,
            "data-bound {} % of the epoch ({:.2} s of {:.2} s, {} steps)",
            percent(self.data_bound()),
            self.data_lost,
            self.wall,
            self.steps
        )?;
        match self.culprit() {
            Some(rank) => {
                let r = &self.ranks[rank];
                let share = if r.wall > 0.0 { r.data / r.wall } else { 0.0 };
                write!(
                    f,
                    ": rank {rank} waited for data {} % of its time, and its data held \
                     the others back in {} of {} steps",
                    percent(share),
                    r.late_steps,
                    self.steps
                )
            }
            None => write!(f, ": no rank's wait for data held the job back"),
        }
    }
}

/// Attributes an epoch from every rank's step times (`ranks[r]` is rank `r`'s, all of
/// the same length: step `k` is the job's step `k` on every rank).
pub fn attribute(ranks: &[Vec<StepTimes>]) -> Result<StallReport> {
    let steps = ranks.first().map_or(0, Vec::len);
    for (rank, times) in ranks.iter().enumerate() {
        if times.len() != steps {
            return Err(Error::Stall(format!(
                "rank {rank} timed {} steps and rank 0 {steps}: every rank must time the \
                 same steps of the epoch",
                times.len()
            )));
        }
        if let Some((step, bad)) = times.iter().enumerate().find(|(_, t)| {
            ![t.data, t.comm, t.wall]
                .iter()
                .all(|x| x.is_finite() && *x >= 0.0)
        }) {
            return Err(Error::Stall(format!(
                "rank {rank}'s step {step} has a time that is negative or not a number: {bad:?}"
            )));
        }
    }
    let mut report = StallReport {
        steps,
        ranks: vec![RankParts::default(); ranks.len()],
        ..StallReport::default()
    };
    if ranks.is_empty() {
        return Ok(report);
    }
    for step in 0..steps {
        let times: Vec<StepTimes> = ranks.iter().map(|r| r[step]).collect();
        // Outside collectives: data wait plus compute, the time to reach the allreduce.
        let busy = |t: &StepTimes| (t.wall - t.comm).max(t.data);
        let compute = |t: &StepTimes| busy(t) - t.data;
        let (last, arrival) = times
            .iter()
            .map(busy)
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("at least one rank");
        let no_data_arrival = times.iter().map(compute).fold(0.0, f64::max);
        let lost = arrival - no_data_arrival;
        report.wall += times.iter().map(|t| t.wall).sum::<f64>() / times.len() as f64;
        report.data_lost += lost;
        for (parts, t) in report.ranks.iter_mut().zip(&times) {
            let waiting = (arrival - busy(t)).clamp(0.0, t.comm);
            parts.data += t.data;
            parts.compute += compute(t);
            parts.waiting += waiting;
            parts.own_comm += t.comm - waiting;
            parts.wall += t.wall;
        }
        if lost > 0.0 {
            report.ranks[last].charged += lost;
            report.ranks[last].late_steps += 1;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(data: f64, compute: f64, comm: f64) -> StepTimes {
        StepTimes {
            data,
            comm,
            wall: data + compute + comm,
        }
    }

    /// Two ranks in lockstep: every step lasts the slower rank's data + compute plus
    /// 0.01 s of allreduce, and the faster rank waits the difference in its allreduce.
    fn lockstep(ranks: &[Vec<(f64, f64)>]) -> Vec<Vec<StepTimes>> {
        let steps = ranks[0].len();
        let mut out = vec![Vec::new(); ranks.len()];
        for k in 0..steps {
            let arrival = ranks.iter().map(|r| r[k].0 + r[k].1).fold(0.0, f64::max);
            for (r, times) in ranks.iter().enumerate() {
                let (d, c) = times[k];
                out[r].push(step(d, c, arrival - d - c + 0.01));
            }
        }
        out
    }

    #[test]
    fn the_slow_rank_is_charged_and_the_others_wait_for_it() {
        // Rank 1 waits 0.05 s for data in every step, rank 0 never.
        let times = lockstep(&[vec![(0.0, 0.1); 4], vec![(0.05, 0.1); 4]]);
        let report = attribute(&times).unwrap();
        assert_eq!(report.steps, 4);
        assert!((report.wall - 4.0 * 0.16).abs() < 1e-9);
        assert!((report.data_lost - 4.0 * 0.05).abs() < 1e-9);
        assert!((report.data_bound() - 0.05 / 0.16).abs() < 1e-9);
        assert_eq!(report.culprit(), Some(1));
        let (fast, slow) = (report.ranks[0], report.ranks[1]);
        assert!((fast.waiting - 0.2).abs() < 1e-9 && (fast.own_comm - 0.04).abs() < 1e-9);
        assert!(slow.waiting.abs() < 1e-9 && (slow.data - 0.2).abs() < 1e-9);
        assert_eq!((slow.late_steps, fast.late_steps), (4, 0));
        for parts in &report.ranks {
            assert!(parts.unaccounted().abs() < 1e-9, "{parts:?}");
        }
        assert_eq!(
            report.to_string(),
            "data-bound 31 % of the epoch (0.20 s of 0.64 s, 4 steps): rank 1 waited for \
             data 31 % of its time, and its data held the others back in 4 of 4 steps"
        );
    }

    #[test]
    fn stalls_on_different_ranks_in_different_steps_all_count() {
        // Each rank waits in one step of two; either way the job waits every step, which
        // neither rank's own data share (25 %) shows.
        let times = lockstep(&[vec![(0.1, 0.1), (0.0, 0.1)], vec![(0.0, 0.1), (0.1, 0.1)]]);
        let report = attribute(&times).unwrap();
        assert!((report.data_bound() - 0.1 / 0.21).abs() < 1e-9);
        assert_eq!(report.ranks[0].late_steps + report.ranks[1].late_steps, 2);
    }

    #[test]
    fn compute_that_is_slower_than_data_is_not_charged_to_data() {
        // Rank 1 computes longer than rank 0 waits for data plus computes: no loss.
        let times = lockstep(&[vec![(0.02, 0.1); 3], vec![(0.0, 0.15); 3]]);
        let report = attribute(&times).unwrap();
        assert_eq!(report.data_lost, 0.0);
        assert_eq!(report.culprit(), None);
        assert!(
            report
                .to_string()
                .ends_with("no rank's wait for data held the job back")
        );
        assert!(report.ranks[0].waiting > 0.0);
    }

    #[test]
    fn ranks_that_timed_different_steps_or_bad_times_are_refused_by_rank() {
        let err = attribute(&[vec![step(0.0, 0.1, 0.0); 3], vec![step(0.0, 0.1, 0.0); 2]]);
        assert_eq!(
            err.unwrap_err().to_string(),
            "stall attribution: rank 1 timed 2 steps and rank 0 3: every rank must time the \
             same steps of the epoch"
        );
        let bad = StepTimes {
            data: f64::NAN,
            ..step(0.0, 0.1, 0.0)
        };
        let err = attribute(&[vec![step(0.0, 0.1, 0.0), bad]]).unwrap_err();
        assert!(
            err.to_string().contains("rank 0's step 1 has a time"),
            "{err}"
        );
        assert_eq!(attribute(&[]).unwrap().steps, 0);
    }
}
