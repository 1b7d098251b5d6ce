//! Settings of the MPI transport, and how they are read from the environment.

use std::time::Duration;

use hvd_core::{Result, env};

/// Settings of an [`MpiCollective`](crate::MpiCollective).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MpiConfig {
    /// How long one collective may block before the job is ended with an error naming
    /// the rank, the tensor and the operation (see the crate docs: MPI cannot cancel a
    /// blocking collective). This bounds a whole call, not a silence as TCP's timeout
    /// does, so the default (5 minutes) leaves room for gigabytes over a slow network.
    pub timeout: Duration,
}

impl Default for MpiConfig {
    fn default() -> Self {
        MpiConfig {
            timeout: Duration::from_secs(300),
        }
    }
}

impl MpiConfig {
    /// The defaults, with `timeout` from `HVD_MPI_TIMEOUT`, else the job's `HVD_TIMEOUT`
    /// (alias `HOROVOD_GLOO_TIMEOUT_SECONDS`): a duration such as `60`, `90s` or `5m`, a
    /// bare number in seconds. A malformed value is an [`Error::Config`](hvd_core::Error::Config) naming the
    /// variable, the value and the accepted form.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut config = MpiConfig::default();
        if let Some(timeout) = env::op_timeout(var, "HVD_MPI_TIMEOUT")? {
            config.timeout = timeout;
        }
        Ok(config)
    }

    /// Sets how long one collective may block.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Result<MpiConfig> {
        MpiConfig::from_vars(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_timeout_comes_from_hvd_mpi_timeout_then_the_job_timeout() {
        let timeout = |pairs: &[(&str, &str)]| from(pairs).unwrap().timeout;
        assert_eq!(
            timeout(&[("HVD_MPI_TIMEOUT", "90s")]),
            Duration::from_secs(90)
        );
        assert_eq!(
            timeout(&[("HVD_MPI_TIMEOUT", "2.5")]),
            Duration::from_millis(2500)
        );
        assert_eq!(timeout(&[("HVD_TIMEOUT", "7")]), Duration::from_secs(7));
        let both = [("HVD_TIMEOUT", "7"), ("HVD_MPI_TIMEOUT", "9")];
        assert_eq!(timeout(&both), Duration::from_secs(9));
        assert_eq!(timeout(&[]), Duration::from_secs(300));
    }

    #[test]
    fn a_bad_timeout_names_the_variable_and_the_form() {
        let err = from(&[("HVD_MPI_TIMEOUT", "soon")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"soon\" for HVD_MPI_TIMEOUT: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in seconds), at most ten years"
        );
        let err = from(&[("HVD_MPI_TIMEOUT", "0")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"0\" for HVD_MPI_TIMEOUT: expected a positive duration such as 30, 2.5 or 5m"
        );
    }
}
