//! What counts as a pass: a test that passed on every rank, or one skipped or failed for
//! a reason listed here, where the reason is the test's own and not hvd's.

use std::fmt;

/// One rank's outcome of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Passed,
    Skipped,
    /// A failure or an error.
    Failed,
}

/// A test's outcome over every rank, with the first message a rank gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Same(Kind, String),
    /// Ranks disagree (passed on one, skipped on the other).
    Mixed(Vec<Kind>),
    /// No result from this rank: killed, timed out, or never reached the test.
    Missing(usize),
}

impl Outcome {
    pub(crate) fn passed() -> Outcome {
        Outcome::Same(Kind::Passed, String::new())
    }

    /// Combines each rank's outcome: a failure on any rank is the test's outcome.
    pub(crate) fn of_ranks(ranks: &[Option<&(Kind, String)>]) -> Outcome {
        if let Some(rank) = ranks.iter().position(Option::is_none) {
            return Outcome::Missing(rank);
        }
        let seen: Vec<&(Kind, String)> = ranks.iter().flatten().copied().collect();
        if let Some((_, message)) = seen.iter().find(|(k, _)| *k == Kind::Failed) {
            return Outcome::Same(Kind::Failed, message.clone());
        }
        let first = seen[0].0;
        if seen.iter().all(|(k, _)| *k == first) {
            return Outcome::Same(first, seen[0].1.clone());
        }
        Outcome::Mixed(seen.iter().map(|(k, _)| *k).collect())
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Same(Kind::Passed, _) => f.write_str("passed"),
            Outcome::Same(Kind::Skipped, m) => write!(f, "skipped: {m}"),
            Outcome::Same(Kind::Failed, m) => write!(f, "failed: {m}"),
            Outcome::Mixed(kinds) => write!(f, "ranks disagree: {kinds:?}"),
            Outcome::Missing(rank) => write!(f, "no result on rank {rank}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Passed,
    /// Not passed, for a listed reason that is not hvd's.
    Excused(&'static str),
    Unexpected(String),
}

/// Skipped because the test needs a GPU, whatever its name.
const GPU_SKIPS: [&str; 2] = ["No GPUs available", "Not enough GPUs available"];

/// Tests Horovod skips itself here: the test, its skip message, and why.
const HOROVODS_OWN_SKIPS: [(&str, &str, &str); 8] = [
    (
        "test_broadcast_state_gpu",
        "Skipped",
        "Horovod's own skip (@unittest.skip; it also needs a GPU)",
    ),
    (
        "test_timeline_api",
        "https://github.com/horovod/horovod/issues/2496",
        "Horovod's own skip (@pytest.mark.skip, horovod issue 2496)",
    ),
    (
        "test_delta_optimizer",
        "Adasum requires MPI",
        "Horovod's own skip without MPI (hvd.mpi_enabled() is False; it also needs a GPU)",
    ),
    // TensorFlow's tests run twice, in a graph and eagerly; these skip one of the two.
    (
        "test_horovod_broadcast_eager_mode_error",
        "Only in eager execution mode",
        "Horovod's own skip of the graph-mode run (the test is of eager mode)",
    ),
    (
        "test_horovod_broadcast_graph_mode",
        "Not in eager execution mode",
        "Horovod's own skip of the eager run (the test is of graph mode)",
    ),
    (
        "test_local_gradient_aggregation",
        "Gradient aggregation for Legacy Optimizer only support graph mode",
        "Horovod's own skip of the eager run (TensorFlow 1 optimizers aggregate in graphs)",
    ),
    (
        "test_local_gradient_aggregation_sparse",
        "Gradient aggregation for Legacy Optimizer only support graph mode",
        "Horovod's own skip of the eager run (TensorFlow 1 optimizers aggregate in graphs)",
    ),
    (
        "test_session",
        "Not a test.",
        "tf.test.TestCase.test_session, a context manager that pytest collects and \
         TensorFlow skips",
    ),
];

/// Tests whose own code is Keras 2's, judged in the run under Keras 3 (they run under
/// tf_keras in the `-tf_keras` run): the test, what its failure says, and why.
const KERAS2_CODE: [(&str, &str, &str); 2] = [
    (
        "test_horovod_syncbn_cpu",
        "Unrecognized keyword arguments passed to BatchNormalization: {'fused': False}",
        "the test's own Keras 2 code (BatchNormalization(fused=False)) fails under Keras 3",
    ),
    (
        "test_partial_distributed_gradient_tape",
        "'Variable' object has no attribute 'ref'",
        "the test's own Keras 2 code (Keras variables' ref()) fails under Keras 3",
    ),
];

/// The run of test_tensorflow.py under Keras 3.
const KERAS3_RUN: &str = "tensorflow";

/// Horovod's optimizer sweeps try every class of `torch.optim`; torch 2.15's `Muon` takes
/// 2-D parameters only and refuses the sweep's model before hvd is involved.
const MUON_SWEEPS: [&str; 3] = [
    "test_broadcast_state",
    "test_broadcast_state_options",
    "test_force_allreduce",
];

/// What those sweeps fail with.
const MUON_FAILURE: &str = "Muon only supports 2D parameters";

const MUON_WHY: &str =
    "torch's Muon takes 2-D parameters only (Horovod's sweep tries every torch.optim class)";

/// The tests that fail on CPU for a listed reason: (test, what its failure says, why).
/// The GPU bundle carries them, to tell these from failures of hvd's own.
pub(crate) fn excused_failures() -> impl Iterator<Item = (&'static str, &'static str, &'static str)>
{
    MUON_SWEEPS
        .iter()
        .map(|test| (*test, MUON_FAILURE, MUON_WHY))
}

/// Horovod's tests whose assertion races with the scheduler rather than testing hvd:
/// (test, what its failure says, why). One that fails so is run again, alone, and
/// passes if it passes then; a barrier that did not wait fails both runs.
const TIMING_RACES: [(&str, &str, &str); 1] = [(
    "test_global_barrier_op",
    "AssertionError: False is not true",
    "the test times rank 0's 5 s sleep on every rank from the moment that rank left the \
     allreduce before it, so a rank the scheduler lets out of that allreduce later than \
     rank 0, by more than the barrier takes, measures under 5 s",
)];

/// Why `test`'s `outcome` may be the scheduler's doing and not hvd's, when it is.
pub(crate) fn timing_race(test: &str, outcome: &Outcome) -> Option<&'static str> {
    let Outcome::Same(Kind::Failed, message) = outcome else {
        return None;
    };
    TIMING_RACES
        .iter()
        .find(|(name, failure, _)| *name == test && message.contains(failure))
        .map(|(_, _, why)| *why)
}

/// Whether a test's outcome in run `run` (a test file's name in `--files`) passes.
pub(crate) fn judge(run: &str, test: &str, outcome: &Outcome) -> Verdict {
    match outcome {
        Outcome::Same(Kind::Passed, _) => Verdict::Passed,
        Outcome::Same(Kind::Skipped, message) => {
            if GPU_SKIPS.iter().any(|m| message.contains(m)) {
                return Verdict::Excused("needs a GPU");
            }
            HOROVODS_OWN_SKIPS
                .iter()
                .find(|(name, skip, _)| *name == test && message.contains(skip))
                .map_or_else(
                    || Verdict::Unexpected(format!("skipped for a reason not listed: {message}")),
                    |(_, _, why)| Verdict::Excused(why),
                )
        }
        Outcome::Same(Kind::Failed, message)
            if MUON_SWEEPS.contains(&test) && message.contains(MUON_FAILURE) =>
        {
            Verdict::Excused(MUON_WHY)
        }
        Outcome::Same(Kind::Failed, message) if run == KERAS3_RUN => KERAS2_CODE
            .iter()
            .find(|(name, failure, _)| *name == test && message.contains(failure))
            .map_or_else(
                || Verdict::Unexpected(outcome.to_string()),
                |(_, _, why)| Verdict::Excused(why),
            ),
        other => Verdict::Unexpected(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(message: &str) -> Outcome {
        Outcome::Same(Kind::Skipped, message.into())
    }

    #[test]
    fn listed_reasons_are_excused_and_nothing_else() {
        assert_eq!(
            judge(
                "torch",
                "test_model_parallelism",
                &skipped("No GPUs available")
            ),
            Verdict::Excused("needs a GPU")
        );
        assert!(matches!(
            judge(
                "torch",
                "test_timeline_api",
                &skipped("https://github.com/horovod/horovod/issues/2496")
            ),
            Verdict::Excused(_)
        ));
        assert_eq!(
            judge(
                "torch",
                "test_horovod_reinit",
                &skipped("Gloo is not available")
            ),
            Verdict::Unexpected("skipped for a reason not listed: Gloo is not available".into())
        );
        let muon = Outcome::Same(
            Kind::Failed,
            "ValueError: Muon only supports 2D parameters whereas we found ...".into(),
        );
        assert!(matches!(
            judge("torch", "test_force_allreduce", &muon),
            Verdict::Excused(_)
        ));
        assert_eq!(
            judge("torch", "test_horovod_allreduce", &muon),
            Verdict::Unexpected(
                "failed: ValueError: Muon only supports 2D parameters whereas we found ...".into()
            )
        );
        let other = Outcome::Same(Kind::Failed, "AssertionError".into());
        assert!(matches!(
            judge("torch", "test_broadcast_state", &other),
            Verdict::Unexpected(_)
        ));
    }

    #[test]
    fn keras2_code_is_excused_only_where_listed_and_graph_errors_never() {
        // A graph's mismatch raises FailedPreconditionError (hvd's status op), as Horovod's.
        let graph = Outcome::Same(
            Kind::Failed,
            "tensorflow.python.framework.errors_impl.UnknownError: Graph execution error: \
             Detected at node 'HorovodBatch' defined at ..."
                .into(),
        );
        assert!(matches!(
            judge("tensorflow", "test_horovod_allreduce_error", &graph),
            Verdict::Unexpected(_)
        ));
        assert!(matches!(
            judge("tensorflow", "test_horovod_allreduce_cpu", &graph),
            Verdict::Unexpected(_)
        ));
        let fused = Outcome::Same(
            Kind::Failed,
            "ValueError: Unrecognized keyword arguments passed to BatchNormalization: \
             {'fused': False}"
                .into(),
        );
        assert!(matches!(
            judge("tensorflow", "test_horovod_syncbn_cpu", &fused),
            Verdict::Excused(_)
        ));
        assert!(matches!(
            judge("tensorflow-tf_keras", "test_horovod_syncbn_cpu", &fused),
            Verdict::Unexpected(_)
        ));
        assert!(matches!(
            judge("tensorflow", "test_session", &skipped("Not a test.")),
            Verdict::Excused(_)
        ));
    }

    #[test]
    fn only_a_listed_race_with_its_own_failure_is_run_again() {
        let failed = |m: &str| Outcome::Same(Kind::Failed, m.into());
        let race = failed("AssertionError: False is not true");
        assert!(
            timing_race("test_global_barrier_op", &race)
                .is_some_and(|why| why.contains("measures under 5 s"))
        );
        assert_eq!(timing_race("test_barrier_op", &race), None);
        let other = failed("HorovodInternalError: barrier timed out");
        assert_eq!(timing_race("test_global_barrier_op", &other), None);
        assert_eq!(
            timing_race("test_global_barrier_op", &Outcome::Missing(1)),
            None
        );
    }

    #[test]
    fn a_failure_on_any_rank_fails_the_test_and_ranks_must_agree() {
        let pass = (Kind::Passed, String::new());
        let fail = (Kind::Failed, "boom".to_string());
        let skip = (Kind::Skipped, "why".to_string());
        assert_eq!(
            Outcome::of_ranks(&[Some(&pass), Some(&fail)]),
            Outcome::Same(Kind::Failed, "boom".into())
        );
        assert_eq!(
            Outcome::of_ranks(&[Some(&pass), Some(&skip)]).to_string(),
            "ranks disagree: [Passed, Skipped]"
        );
        assert_eq!(Outcome::of_ranks(&[Some(&pass), None]), Outcome::Missing(1));
    }
}
