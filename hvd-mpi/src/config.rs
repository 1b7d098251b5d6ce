//! Settings of the MPI transport, and how they are read from the environment.

use std::time::Duration;

use hvd_core::units::{TimeUnit, parse_duration};
use hvd_core::{Error, Result};

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
    /// The defaults, with `timeout` from `HVD_MPI_TIMEOUT` (a duration such as `60`, `90s`
    /// or `5m`; a bare number is in seconds). A malformed value is an [`Error::Config`]
    /// naming the variable, the value and the accepted form.
    pub fn from_env() -> Result<Self> {
        Self::from_var(std::env::var("HVD_MPI_TIMEOUT").ok())
    }

    fn from_var(timeout: Option<String>) -> Result<Self> {
        let mut config = MpiConfig::default();
        if let Some(value) = timeout {
            let parsed = parse_duration("HVD_MPI_TIMEOUT", &value, TimeUnit::Seconds)?;
            if parsed.is_zero() {
                return Err(Error::Config {
                    name: "HVD_MPI_TIMEOUT".into(),
                    value,
                    expected: "a duration above zero, such as 60, 90s or 5m".into(),
                });
            }
            config.timeout = parsed;
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

    #[test]
    fn the_timeout_comes_from_hvd_mpi_timeout() {
        let config = MpiConfig::from_var(Some("90s".into())).unwrap();
        assert_eq!(config.timeout, Duration::from_secs(90));
        let config = MpiConfig::from_var(Some("2.5".into())).unwrap();
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert_eq!(
            MpiConfig::from_var(None).unwrap().timeout,
            Duration::from_secs(300)
        );
    }

    #[test]
    fn a_bad_timeout_names_the_variable_and_the_form() {
        let err = MpiConfig::from_var(Some("soon".into())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"soon\" for HVD_MPI_TIMEOUT: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in seconds), at most ten years"
        );
        let err = MpiConfig::from_var(Some("0".into())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"0\" for HVD_MPI_TIMEOUT: expected a duration above zero, such as 60, 90s or 5m"
        );
    }
}
