//! Which rank's failure ended a job. When one rank dies, its peers fail within
//! milliseconds with "lost rank N", often before the launcher has seen the death, so
//! the first exit it sees is usually a consequence. The root cause is the rank the
//! others lost (following chains: a rank that lost one that lost another), else a rank
//! killed by a signal, else a rank that failed on its own.

use std::collections::BTreeMap;

use hvd_core::driver::blame;

/// What the launcher knows about one rank once the job has settled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    /// It exited unsuccessfully.
    pub failed: bool,
    /// A signal ended it (not one the launcher sent: the verdict comes first).
    pub killed_by_signal: bool,
    /// The rank it said it lost, through the rendezvous store.
    pub lost: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The rank whose failure ended the job.
    pub root: usize,
    /// Ranks that failed because they lost it.
    pub lost_by: Vec<usize>,
}

/// The verdict for a job whose first failure the launcher saw on rank `first`.
pub(crate) fn verdict(seen: &[Seen], first: usize) -> Verdict {
    let mut accused: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (reporter, s) in seen.iter().enumerate() {
        if let Some(lost) = s.lost.filter(|l| *l < seen.len()) {
            // The end of the chain of losses: a rank that lost a rank that was itself only
            // waiting on another is a witness, not a cause.
            let culprit = blame::follow(lost, seen.len(), |r| seen[r].lost).end();
            if culprit != reporter {
                accused.entry(culprit).or_default().push(reporter);
            }
        }
    }
    // Most accusers first; among equals the lowest rank (BTreeMap order, stable max).
    let most_accused = accused
        .iter()
        .rev()
        .max_by_key(|(_, by)| by.len())
        .map(|(rank, _)| *rank);
    // A report that names no rank of the job is no report.
    let on_its_own = |r: &usize| seen[*r].failed && seen[*r].lost.is_none_or(|l| l >= seen.len());
    let root = most_accused
        .or_else(|| (0..seen.len()).find(|r| seen[*r].killed_by_signal))
        .or_else(|| Some(first).filter(on_its_own))
        .or_else(|| (0..seen.len()).find(on_its_own))
        .unwrap_or(first);
    let lost_by = accused
        .remove(&root)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| seen[*r].failed)
        .collect();
    Verdict { root, lost_by }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(lost: Option<usize>) -> Seen {
        Seen {
            failed: true,
            killed_by_signal: false,
            lost,
        }
    }

    const KILLED: Seen = Seen {
        failed: true,
        killed_by_signal: true,
        lost: None,
    };
    const RUNNING: Seen = Seen {
        failed: false,
        killed_by_signal: false,
        lost: None,
    };

    #[test]
    fn the_rank_the_others_lost_is_the_cause_whoever_exited_first() {
        let seen = [failed(Some(2)), failed(Some(2)), KILLED];
        for first in 0..3 {
            assert_eq!(
                verdict(&seen, first),
                Verdict {
                    root: 2,
                    lost_by: vec![0, 1]
                }
            );
        }
    }

    #[test]
    fn a_signal_names_the_cause_when_nobody_reported() {
        let seen = [failed(None), failed(None), KILLED];
        assert_eq!(verdict(&seen, 0).root, 2);
    }

    #[test]
    fn chains_of_losses_end_at_the_silent_rank() {
        // Rank 0 waited on 1, which waited on 2: 2 is still running (frozen).
        let seen = [failed(Some(1)), failed(Some(2)), RUNNING];
        assert_eq!(
            verdict(&seen, 0),
            Verdict {
                root: 2,
                lost_by: vec![0, 1]
            }
        );
    }

    #[test]
    fn a_rank_that_failed_on_its_own_beats_one_that_only_lost_it() {
        // Rank 1 exits with an error of its own; rank 0 loses it but exits first.
        let seen = [failed(Some(1)), failed(None), RUNNING];
        assert_eq!(
            verdict(&seen, 0),
            Verdict {
                root: 1,
                lost_by: vec![0]
            }
        );
        // Nobody reports and nobody was killed: the first failure stands.
        let seen = [failed(None), failed(None), RUNNING];
        assert_eq!(verdict(&seen, 1).root, 1);
    }

    #[test]
    fn reports_that_make_a_cycle_or_name_no_rank_do_not_loop() {
        // 0 and 1 name each other, which accuses no one; 2 names a rank the job does not
        // have, which counts as no report: 2 failed on its own.
        let seen = [failed(Some(1)), failed(Some(0)), failed(Some(7))];
        assert_eq!(
            verdict(&seen, 0),
            Verdict {
                root: 2,
                lost_by: vec![]
            }
        );
    }
}
