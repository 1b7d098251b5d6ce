//! Settings of the NCCL transport, and how they are read from the environment.

use std::time::Duration;

use hvd_core::{Error, Result, env};

use crate::{driver, library};

/// Settings of an [`NcclCollective`](crate::NcclCollective) and a
/// [`CudaMemory`](crate::CudaMemory).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NcclConfig {
    /// The NCCL libraries to try, in order.
    pub nccl_library: Vec<String>,
    /// The CUDA driver libraries to try, in order.
    pub cuda_library: Vec<String>,
    /// How long forming the communicator may take.
    pub start_timeout: Duration,
    /// How long a call waits for the device (and so for its peers) before it fails.
    pub op_timeout: Duration,
    /// This rank's CUDA device; `None`: its local rank, modulo the devices it sees.
    pub device: Option<u32>,
}

impl Default for NcclConfig {
    fn default() -> Self {
        NcclConfig {
            nccl_library: library::NAMES.iter().map(|n| n.to_string()).collect(),
            cuda_library: driver::NAMES.iter().map(|n| n.to_string()).collect(),
            start_timeout: env::DEFAULT_START_TIMEOUT,
            op_timeout: env::DEFAULT_OP_TIMEOUT,
            device: None,
        }
    }
}

impl NcclConfig {
    /// The defaults, changed by these environment variables:
    ///
    /// | variable | field | form |
    /// |---|---|---|
    /// | `HVD_NCCL_LIBRARY` | `nccl_library` | a path or a library name |
    /// | `HVD_CUDA_LIBRARY` | `cuda_library` | a path or a library name |
    /// | `HVD_START_TIMEOUT` (alias `HOROVOD_START_TIMEOUT`) | `start_timeout` | seconds, e.g. `30` or `2.5` |
    /// | `HVD_NCCL_TIMEOUT`, else the job's `HVD_TIMEOUT` (alias `HOROVOD_GLOO_TIMEOUT_SECONDS`) | `op_timeout` | seconds |
    /// | `HVD_NCCL_DEVICE` | `device` | a CUDA device ordinal |
    ///
    /// A malformed value is an [`Error::Config`] naming the variable and the form.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let libraries = |name: &str, defaults: &[&str]| match var(name) {
            Some(path) if !path.is_empty() => vec![path],
            _ => defaults.iter().map(|n| n.to_string()).collect(),
        };
        let mut config = NcclConfig {
            nccl_library: libraries(library::LIBRARY_VAR, library::NAMES),
            cuda_library: libraries(driver::CUDA_LIBRARY_VAR, driver::NAMES),
            ..NcclConfig::default()
        };
        if let Some(timeout) = env::start_timeout(&var)? {
            config.start_timeout = timeout;
        }
        if let Some(timeout) = env::op_timeout(&var, "HVD_NCCL_TIMEOUT")? {
            config.op_timeout = timeout;
        }
        if let Some(value) = var("HVD_NCCL_DEVICE") {
            config.device = Some(value.trim().parse().map_err(|_| Error::Config {
                name: "HVD_NCCL_DEVICE".into(),
                value: value.clone(),
                expected: "a CUDA device ordinal (0, 1, ...)".into(),
            })?);
        }
        Ok(config)
    }

    /// The libraries at these paths instead of the system's (a test double, a build of
    /// one's own).
    pub fn with_libraries(mut self, nccl: impl Into<String>, cuda: impl Into<String>) -> Self {
        self.nccl_library = vec![nccl.into()];
        self.cuda_library = vec![cuda.into()];
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<NcclConfig> {
        NcclConfig::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn variables_set_the_timeouts_and_the_device() {
        let config = from(&[
            ("HVD_START_TIMEOUT", "2.5"),
            ("HVD_NCCL_TIMEOUT", "500ms"),
            ("HVD_NCCL_DEVICE", "3"),
        ])
        .unwrap();
        assert_eq!(config.start_timeout, Duration::from_millis(2500));
        assert_eq!(config.op_timeout, Duration::from_millis(500));
        assert_eq!(config.device, Some(3));
    }

    #[test]
    fn the_jobs_timeout_applies_unless_nccls_own_is_set() {
        let job = from(&[("HVD_TIMEOUT", "2")]).unwrap();
        assert_eq!(job.op_timeout, Duration::from_secs(2));
        let both = from(&[("HVD_TIMEOUT", "2"), ("HVD_NCCL_TIMEOUT", "5")]).unwrap();
        assert_eq!(both.op_timeout, Duration::from_secs(5));
    }

    #[test]
    fn bad_values_name_the_variable() {
        assert_eq!(
            from(&[("HVD_NCCL_DEVICE", "gpu0")])
                .unwrap_err()
                .to_string(),
            "invalid value \"gpu0\" for HVD_NCCL_DEVICE: expected a CUDA device ordinal (0, 1, ...)"
        );
        assert_eq!(
            from(&[("HVD_NCCL_TIMEOUT", "0")]).unwrap_err().to_string(),
            "invalid value \"0\" for HVD_NCCL_TIMEOUT: expected a positive duration such as 30, 2.5 or 5m"
        );
    }
}
