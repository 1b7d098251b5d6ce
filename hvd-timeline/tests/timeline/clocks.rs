//! Clock alignment between ranks that share a clock (threads of one process): the
//! estimate must be within its own error bound of the truth, zero.

use hvd_timeline::align_clocks;

use crate::common::on_ranks;

#[test]
fn ranks_sharing_a_clock_are_measured_at_zero_offset_within_the_error() {
    let alignments = on_ranks(3, |_, group| align_clocks(&group, 8).unwrap());
    for (rank, alignment) in alignments.iter().enumerate() {
        assert_eq!(
            alignment.ranks(),
            alignments[0].ranks(),
            "every rank knows all"
        );
        assert_eq!(alignment.local(), alignment.ranks()[rank]);
    }
    let offsets = alignments[0].ranks();
    assert_eq!(offsets[0].offset_ns, 0);
    for (rank, o) in offsets.iter().enumerate() {
        assert!(
            o.offset_ns.unsigned_abs() <= o.error_ns,
            "rank {rank}: offset {} ns outside its error {} ns",
            o.offset_ns,
            o.error_ns
        );
    }
    // A bound of one barrier latency between threads; generous for a loaded machine.
    let max = alignments[0].max_error_ns();
    assert!(max < 50_000_000, "error bound {max} ns");
}
