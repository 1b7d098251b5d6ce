//! What the ranks expect the next cycle to run from the response cache: the set whose
//! data then rides the negotiation round (`speculate.rs`). Fed only what every rank
//! shares (the cache slots each cycle ran, whether a guess held), so it is the same on
//! every rank.

/// Bytes of failed guesses an expectation may cost before it is dropped. Rounds where
/// a rank is not ready (idle cycles while a step computes) carry the set's bytes for
/// nothing: a scalar metric can wait out thousands of them, a 16 KiB set sixteen. The
/// next cycle that runs the set again restores the expectation with a fresh budget.
const WASTE_BUDGET: usize = 256 * 1024;

#[derive(Debug)]
pub(crate) struct Expectation {
    /// The cached slots the last cycle with cache hits ran, sorted.
    last: Vec<usize>,
    /// Set when the two last such cycles ran the same slots (and the budget lasts).
    repeated: bool,
    /// What failed guesses may still cost, in bytes.
    budget: usize,
}

impl Default for Expectation {
    fn default() -> Self {
        Expectation {
            last: Vec::new(),
            repeated: false,
            budget: WASTE_BUDGET,
        }
    }
}

impl Expectation {
    /// Records the slots a cycle ran from the cache; a cycle without any leaves the
    /// expectation as it was (idle cycles, barriers and new tensors come between steps).
    pub fn observe(&mut self, mut hits: Vec<usize>) {
        if hits.is_empty() {
            return;
        }
        hits.sort_unstable();
        self.repeated = hits == self.last;
        if self.repeated {
            self.budget = WASTE_BUDGET;
        } else {
            self.last = hits;
        }
    }

    /// A round carried `bytes` that some rank could not match.
    pub fn missed(&mut self, bytes: usize) {
        self.budget = self.budget.saturating_sub(bytes.max(1));
        if self.budget == 0 {
            self.repeated = false;
        }
    }

    /// The slots expected in the next cycle, once a set has repeated.
    pub fn expected(&self) -> Option<&[usize]> {
        self.repeated.then_some(&self.last[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_expected_once_it_ran_twice_in_a_row_in_any_order() {
        let mut e = Expectation::default();
        e.observe(vec![1, 0]);
        assert_eq!(e.expected(), None);
        e.observe(vec![]);
        assert_eq!(e.expected(), None, "a cycle without hits changes nothing");
        e.observe(vec![0, 1]);
        assert_eq!(e.expected(), Some(&[0, 1][..]));
        e.observe(vec![]);
        assert_eq!(e.expected(), Some(&[0, 1][..]));
    }

    #[test]
    fn a_different_set_ends_the_expectation_until_it_repeats() {
        let mut e = Expectation::default();
        e.observe(vec![3]);
        e.observe(vec![3]);
        e.observe(vec![3, 4]);
        assert_eq!(e.expected(), None);
        e.observe(vec![3]);
        assert_eq!(e.expected(), None, "sets that alternate never speculate");
        e.observe(vec![3]);
        assert_eq!(e.expected(), Some(&[3][..]));
    }

    #[test]
    fn failed_guesses_end_the_expectation_when_their_bytes_run_out() {
        let mut e = Expectation::default();
        e.observe(vec![7]);
        e.observe(vec![7]);
        for _ in 0..15 {
            e.missed(16 * 1024);
        }
        assert_eq!(e.expected(), Some(&[7][..]));
        e.missed(16 * 1024);
        assert_eq!(e.expected(), None);
        // The set runs again: expected, with a fresh budget.
        e.observe(vec![7]);
        assert_eq!(e.expected(), Some(&[7][..]));
        e.missed(16 * 1024);
        assert_eq!(e.expected(), Some(&[7][..]));
    }
}
