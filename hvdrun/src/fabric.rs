//! libfabric settings that hvd's `rdma` transport wants and libfabric reads only from the
//! environment, when a provider starts: the launcher exports them to every rank, where
//! setting them from inside a running (possibly threaded) process would not be safe.

/// rxm's eager limit over the tcp provider, raised from libfabric's 16 KiB.
///
/// rxm sends a larger message by rendezvous: the receiver reads it with an RMA read,
/// which over tcp costs several round trips. hvd's frames up to 256 KiB then go eagerly.
/// Over tcp, rxm receives eager messages straight into the posted buffer (dynamic receive
/// buffering), so the higher limit costs no memory: a 4-rank job's largest resident set
/// stayed at 146 MB, where raising `FI_OFI_RXM_BUFFER_SIZE` instead grows it to 1.6 GB.
/// Measured (`hvd-bench allreduce --backend rdma`, `tcp;ofi_rxm`, medians of 3 alternating
/// runs on 2 cores): 4 ranks, 64 KiB 734 → 151 µs, 1 MiB 2.25 → 1.65 ms; 2 ranks, 64 KiB
/// 57 → 31 µs. Over verbs rxm needs the limit equal to its buffer size, so it is left
/// alone there.
pub(crate) const RXM_TCP_EAGER_LIMIT: &str = "262144";

const EAGER_LIMIT_VAR: &str = "FI_OFI_RXM_EAGER_LIMIT";

/// The settings to add to a rank's environment, given how `lookup` reads the job's
/// variables: none unless the job names a tcp provider (`HVD_RDMA_PROVIDER`, or
/// `FI_PROVIDER`), and never one the user set.
pub(crate) fn defaults(lookup: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let provider = lookup("HVD_RDMA_PROVIDER").or_else(|| lookup("FI_PROVIDER"));
    let over_tcp = provider.is_some_and(|p| p.split(';').next() == Some("tcp"));
    if over_tcp && lookup(EAGER_LIMIT_VAR).is_none() {
        vec![(EAGER_LIMIT_VAR.into(), RXM_TCP_EAGER_LIMIT.into())]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        defaults(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn a_tcp_provider_gets_the_higher_eager_limit() {
        let expected = vec![(EAGER_LIMIT_VAR.to_string(), "262144".to_string())];
        assert_eq!(with(&[("HVD_RDMA_PROVIDER", "tcp;ofi_rxm")]), expected);
        assert_eq!(with(&[("FI_PROVIDER", "tcp")]), expected);
    }

    #[test]
    fn other_providers_and_a_users_own_limit_are_left_alone() {
        assert_eq!(with(&[]), []);
        assert_eq!(with(&[("HVD_RDMA_PROVIDER", "verbs;ofi_rxm")]), []);
        assert_eq!(with(&[("HVD_RDMA_PROVIDER", "shm")]), []);
        // hvd's own name wins over libfabric's, as in the transport.
        assert_eq!(
            with(&[
                ("HVD_RDMA_PROVIDER", "verbs;ofi_rxm"),
                ("FI_PROVIDER", "tcp")
            ]),
            []
        );
        assert_eq!(
            with(&[
                ("HVD_RDMA_PROVIDER", "tcp;ofi_rxm"),
                (EAGER_LIMIT_VAR, "65536")
            ]),
            []
        );
    }
}
