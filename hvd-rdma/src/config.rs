//! Settings of an RDMA group, from code or from the environment.

use std::time::Duration;

use hvd_core::units::{parse_bytes, parse_bytes_in};
use hvd_core::{Result, env};

/// How an [`RdmaCollective`](crate::RdmaCollective) forms its group and runs its calls.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RdmaConfig {
    /// The libfabric provider (`"tcp;ofi_rxm"`, `"shm"`, `"verbs;ofi_rxm"`, `"efa"`);
    /// `None` takes the first of [`PREFERENCE`](crate::PREFERENCE) that is offered.
    pub provider: Option<String>,
    /// How long forming the group may take before the missing ranks are named.
    pub start_timeout: Duration,
    /// How long a call waits without any message moving before it fails.
    pub op_timeout: Duration,
    /// Calls of at most this many bytes use the latency-optimal algorithms.
    pub small_bytes: usize,
    /// Ring and chain transfers are cut into messages of this many bytes. Larger than
    /// over TCP because every large message of a provider costs a rendezvous (a request
    /// and an acknowledgement) before its bytes move: on loopback `tcp;ofi_rxm`, 2 MiB
    /// beat 256 KiB to 1 MiB at 16 and 64 MiB, and `shm` was indifferent.
    pub chunk_bytes: usize,
    /// Moves every message through registered bounce buffers, as providers that need
    /// local registration (`FI_MR_LOCAL`: verbs, EFA) require, on any provider: how that
    /// path is tested where no such hardware is.
    pub register_memory: bool,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            provider: None,
            start_timeout: env::DEFAULT_START_TIMEOUT,
            op_timeout: env::DEFAULT_OP_TIMEOUT,
            small_bytes: 256 << 10,
            chunk_bytes: 2 << 20,
            register_memory: false,
        }
    }
}

impl RdmaConfig {
    /// The defaults, overridden by the environment:
    ///
    /// | variable | field | form |
    /// |---|---|---|
    /// | `HVD_RDMA_PROVIDER` (alias `FI_PROVIDER`) | `provider` | a provider name |
    /// | `HVD_START_TIMEOUT` (alias `HOROVOD_START_TIMEOUT`) | `start_timeout` | seconds, e.g. `30` or `2.5` |
    /// | `HVD_RDMA_TIMEOUT`, else the job's `HVD_TIMEOUT` (alias `HOROVOD_GLOO_TIMEOUT_SECONDS`) | `op_timeout` | seconds |
    /// | `HVD_RDMA_SMALL_BYTES` | `small_bytes` | a byte size such as `65536` or `64K` |
    /// | `HVD_RDMA_CHUNK_BYTES` | `chunk_bytes` | a positive byte size |
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut config = RdmaConfig {
            provider: var("HVD_RDMA_PROVIDER")
                .or_else(|| var("FI_PROVIDER"))
                .filter(|p| !p.is_empty()),
            ..RdmaConfig::default()
        };
        if let Some(timeout) = env::start_timeout(&var)? {
            config.start_timeout = timeout;
        }
        if let Some(timeout) = env::op_timeout(&var, "HVD_RDMA_TIMEOUT")? {
            config.op_timeout = timeout;
        }
        if let Some(value) = var("HVD_RDMA_SMALL_BYTES") {
            config.small_bytes = parse_bytes("HVD_RDMA_SMALL_BYTES", &value)?;
        }
        if let Some(value) = var("HVD_RDMA_CHUNK_BYTES") {
            config.chunk_bytes = parse_bytes_in("HVD_RDMA_CHUNK_BYTES", &value, 1..=usize::MAX)?;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<RdmaConfig> {
        RdmaConfig::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn variables_set_every_field() -> Result<()> {
        let config = from(&[
            ("HVD_RDMA_PROVIDER", "shm"),
            ("HVD_START_TIMEOUT", "2.5"),
            ("HVD_RDMA_TIMEOUT", "10"),
            ("HVD_RDMA_SMALL_BYTES", "128K"),
            ("HVD_RDMA_CHUNK_BYTES", "1M"),
        ])?;
        assert_eq!(config.provider.as_deref(), Some("shm"));
        assert_eq!(config.start_timeout, Duration::from_millis(2500));
        assert_eq!(config.op_timeout, Duration::from_secs(10));
        assert_eq!(
            (config.small_bytes, config.chunk_bytes),
            (128 << 10, 1 << 20)
        );
        Ok(())
    }

    #[test]
    fn hvd_rdma_provider_wins_over_fi_provider() -> Result<()> {
        let config = from(&[("HVD_RDMA_PROVIDER", "shm"), ("FI_PROVIDER", "tcp")])?;
        assert_eq!(config.provider.as_deref(), Some("shm"));
        assert_eq!(
            from(&[("FI_PROVIDER", "tcp")])?.provider.as_deref(),
            Some("tcp")
        );
        Ok(())
    }

    #[test]
    fn bad_values_name_the_variable_and_the_form() {
        let zero = from(&[("HVD_RDMA_TIMEOUT", "0")]).map(|_| ());
        assert_eq!(
            zero.map_err(|e| e.to_string()),
            Err("invalid value \"0\" for HVD_RDMA_TIMEOUT: expected a positive duration such as 30, 2.5 or 5m".into())
        );
        let chunk = from(&[("HVD_RDMA_CHUNK_BYTES", "0")]).map(|_| ());
        assert_eq!(
            chunk.map_err(|e| e.to_string()),
            Err(format!(
                "invalid value \"0\" for HVD_RDMA_CHUNK_BYTES: expected at least 1: {}",
                hvd_core::units::BYTE_FORMS
            ))
        );
    }
}
