//! Settings of the shared-memory transport, and how they are read from the environment.

use std::time::Duration;

use hvd_core::units::{check_bytes_in, parse_bytes};
use hvd_core::{Error, Result, env};

/// Longest job id accepted: it is part of the segment's file name.
const MAX_JOB_ID: usize = 64;

/// Bounds of a slot: at least a page, and small enough that a group of 8 fits any host.
pub(crate) const MIN_SLOT_BYTES: usize = 4 << 10;
pub(crate) const MAX_SLOT_BYTES: usize = 256 << 20;

/// Settings of a [`ShmCollective`](crate::ShmCollective).
///
/// Start from [`ShmConfig::default`] or [`ShmConfig::from_env`] and change fields as
/// needed. `slot_bytes` and `small_bytes` must be the same on every rank (rank 0's
/// `slot_bytes` sizes the segment; a rank that picks another algorithm for the same call
/// is refused with an error naming both ranks).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ShmConfig {
    /// How long `connect` waits for every rank to attach.
    pub start_timeout: Duration,
    /// How long an operation waits for a peer that makes no progress.
    pub op_timeout: Duration,
    /// Identifies the job in the segment's name (letters, digits, `-` and `_`), so a
    /// leftover segment says whose it was.
    pub job_id: String,
    /// Bytes of each of the two buffers every rank owns in the segment: the unit in which
    /// large tensors are pipelined.
    pub slot_bytes: usize,
    /// Allreduces of at most this many bytes are copied in whole and reduced by every rank
    /// (one synchronisation); larger ones are split so each rank reduces 1/n.
    pub small_bytes: usize,
    /// How long a waiting rank polls before it sleeps on a futex. `None` picks by whether
    /// this host has a core for each rank: 50 us if so, otherwise 20 us.
    pub busy_poll: Option<Duration>,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            start_timeout: env::DEFAULT_START_TIMEOUT,
            op_timeout: env::DEFAULT_OP_TIMEOUT,
            job_id: String::new(),
            slot_bytes: 512 << 10,
            small_bytes: 64 << 10,
            busy_poll: None,
        }
    }
}

impl ShmConfig {
    /// The defaults, changed by these environment variables:
    ///
    /// | variable | field | form |
    /// |---|---|---|
    /// | `HVD_START_TIMEOUT` (alias `HOROVOD_START_TIMEOUT`) | `start_timeout` | seconds, e.g. `30` or `2.5` |
    /// | `HVD_SHM_TIMEOUT`, else the job's `HVD_TIMEOUT` (alias `HOROVOD_GLOO_TIMEOUT_SECONDS`) | `op_timeout` | seconds |
    /// | `HVD_JOB_ID` | `job_id` | up to 64 letters, digits, `-`, `_` |
    /// | `HVD_SHM_SLOT_BYTES` | `slot_bytes` | a byte size, 4K to 256M |
    /// | `HVD_SHM_SMALL_BYTES` | `small_bytes` | a byte size |
    ///
    /// A malformed value is an [`Error::Config`] naming the variable and the form.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut config = ShmConfig::default();
        if let Some(timeout) = env::start_timeout(&var)? {
            config.start_timeout = timeout;
        }
        if let Some(timeout) = env::op_timeout(&var, "HVD_SHM_TIMEOUT")? {
            config.op_timeout = timeout;
        }
        if let Some(value) = var("HVD_JOB_ID") {
            config.job_id = value;
        }
        if let Some(value) = var("HVD_SHM_SLOT_BYTES") {
            config.slot_bytes = parse_bytes("HVD_SHM_SLOT_BYTES", &value)?;
        }
        if let Some(value) = var("HVD_SHM_SMALL_BYTES") {
            config.small_bytes = parse_bytes("HVD_SHM_SMALL_BYTES", &value)?;
        }
        config.check()?;
        Ok(config)
    }

    /// Refuses values the transport cannot work with; `connect` calls it too, so a config
    /// built in code gets the same errors as one read from the environment.
    pub(crate) fn check(&self) -> Result<()> {
        let job_ok = self.job_id.len() <= MAX_JOB_ID
            && self
                .job_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !job_ok {
            return Err(Error::Config {
                name: "HVD_JOB_ID".into(),
                value: self.job_id.clone(),
                expected: format!("at most {MAX_JOB_ID} letters, digits, '-' or '_'"),
            });
        }
        check_bytes_in(
            "HVD_SHM_SLOT_BYTES",
            self.slot_bytes,
            MIN_SLOT_BYTES..=MAX_SLOT_BYTES,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<ShmConfig> {
        ShmConfig::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn variables_set_every_field() {
        let config = from(&[
            ("HVD_START_TIMEOUT", "2.5"),
            ("HVD_SHM_TIMEOUT", "500ms"),
            ("HVD_JOB_ID", "job-7"),
            ("HVD_SHM_SLOT_BYTES", "4M"),
            ("HVD_SHM_SMALL_BYTES", "128K"),
        ])
        .unwrap();
        assert_eq!(config.start_timeout, Duration::from_millis(2500));
        assert_eq!(config.op_timeout, Duration::from_millis(500));
        assert_eq!(config.job_id, "job-7");
        assert_eq!(
            (config.slot_bytes, config.small_bytes),
            (4 << 20, 128 << 10)
        );
    }

    #[test]
    fn a_job_id_that_cannot_be_a_file_name_is_refused() {
        assert_eq!(
            from(&[("HVD_JOB_ID", "a/b")]).unwrap_err().to_string(),
            "invalid value \"a/b\" for HVD_JOB_ID: expected at most 64 letters, digits, '-' or '_'"
        );
    }

    #[test]
    fn a_slot_out_of_range_is_refused() {
        let err = from(&[("HVD_SHM_SLOT_BYTES", "1K")])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "invalid value \"1024\" for HVD_SHM_SLOT_BYTES: expected from 4K to 256M"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_zero_timeout_is_refused() {
        assert_eq!(
            from(&[("HVD_SHM_TIMEOUT", "0")]).unwrap_err().to_string(),
            "invalid value \"0\" for HVD_SHM_TIMEOUT: expected a positive duration such as 30, 2.5 or 5m"
        );
    }
}
