//! Settings of the TCP transport, and how they are read from the environment.

use std::fmt;
use std::time::Duration;

use hvd_core::units::{TimeUnit, parse_bytes_in, parse_duration};
use hvd_core::{Error, Result, env};

/// Longest job id accepted, so that a handshake stays small and bounded.
pub(crate) const MAX_JOB_ID: usize = 256;

/// The largest accepted crossover: small messages are staged whole in memory.
const MAX_SMALL_BYTES: usize = 64 << 20;

/// Settings of a [`TcpCollective`](crate::TcpCollective).
///
/// Start from [`TcpConfig::default`] or [`TcpConfig::from_env`] and change fields as
/// needed. Every rank of a job must use the same `secret` and `job_id`; the other fields
/// may differ between ranks, although `small_bytes` should not (every rank must pick the
/// same algorithm for the same call, which a differing crossover would break).
#[derive(Clone)]
#[non_exhaustive]
pub struct TcpConfig {
    /// How long `connect` waits for every rank to appear and connect.
    pub start_timeout: Duration,
    /// How long an operation waits while no byte moves before it gives up on the peers it
    /// waits for.
    pub op_timeout: Duration,
    /// The network interface to listen and connect on (`eth0`, or a list `eth0,ib0` of
    /// which the first this host has is used); `None` picks one.
    pub interface: Option<String>,
    /// The shared secret every connection proves knowledge of. Empty when unset: the
    /// handshake then still checks the protocol, job and ranks, but anyone who can reach
    /// the ports can join.
    pub secret: Vec<u8>,
    /// Identifies the job, so that connections from another job are refused.
    pub job_id: String,
    /// Calls of at most this many bytes use the latency-optimal algorithms (recursive
    /// doubling, flat or binomial trees, direct exchanges); larger ones those that move
    /// the fewest bytes (see [`hvd_core::schedule::choice`]).
    pub small_bytes: usize,
    /// Largest frame of a pipelined transfer: the unit in which a ring or chain forwards
    /// data, so smaller chunks start forwarding sooner and larger ones cost fewer headers.
    pub chunk_bytes: usize,
    /// How long a waiting rank polls its sockets without sleeping before it blocks: a
    /// wake-up after a sleep costs tens of microseconds, which dominates small messages.
    /// `None` (the default) picks by whether this host has a core for each of its ranks:
    /// 1 ms if so; otherwise 50 us, yielding the core between polls to the other ranks.
    pub busy_poll: Option<Duration>,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            start_timeout: env::DEFAULT_START_TIMEOUT,
            op_timeout: env::DEFAULT_OP_TIMEOUT,
            interface: None,
            secret: Vec::new(),
            job_id: String::new(),
            small_bytes: 256 << 10,
            chunk_bytes: 512 << 10,
            busy_poll: None,
        }
    }
}

/// The secret stays out of logs.
impl fmt::Debug for TcpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpConfig")
            .field("start_timeout", &self.start_timeout)
            .field("op_timeout", &self.op_timeout)
            .field("interface", &self.interface)
            .field("secret", &format_args!("<{} bytes>", self.secret.len()))
            .field("job_id", &self.job_id)
            .field("small_bytes", &self.small_bytes)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("busy_poll", &self.busy_poll)
            .finish()
    }
}

impl TcpConfig {
    /// The defaults, changed by these environment variables:
    ///
    /// | variable | meaning | form |
    /// |---|---|---|
    /// | `HVD_IFACE` (alias `HOROVOD_GLOO_IFACE`) | interface to use | a name such as `eth0`, or a list `eth0,ib0` |
    /// | `HVD_SECRET` | shared secret | any bytes |
    /// | `HVD_JOB_ID` | job id | up to 256 bytes of text |
    /// | `HVD_START_TIMEOUT` (alias `HOROVOD_START_TIMEOUT`) | `start_timeout` | seconds, e.g. `30` or `2.5` |
    /// | `HVD_TCP_TIMEOUT`, else the job's `HVD_TIMEOUT` (alias `HOROVOD_GLOO_TIMEOUT_SECONDS`) | `op_timeout` | seconds |
    /// | `HVD_TCP_SMALL_BYTES` | `small_bytes` | a byte size such as `65536` or `64K` |
    /// | `HVD_TCP_BUSY_POLL` | `busy_poll` | a duration such as `50us`, `1ms` or `1h` (a bare number is in milliseconds); `0` sleeps at once |
    ///
    /// A malformed value is an [`Error::Config`] that names the variable, the value and
    /// the accepted form.
    pub fn from_env() -> Result<Self> {
        let mut config = Self::from_vars(|name| std::env::var(name).ok())?;
        config.secret = env::job_secret();
        Ok(config)
    }

    /// [`from_env`](Self::from_env) over any source of variables, but for the secret,
    /// which only [`env::job_secret`] reads.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut config = TcpConfig::default();
        let interface = var("HVD_IFACE").or_else(|| var("HOROVOD_GLOO_IFACE"));
        config.interface = interface.filter(|name| !name.trim().is_empty());
        if let Some(job_id) = var("HVD_JOB_ID") {
            if job_id.len() > MAX_JOB_ID {
                return Err(Error::Config {
                    name: "HVD_JOB_ID".into(),
                    value: job_id,
                    expected: format!("at most {MAX_JOB_ID} bytes of text"),
                });
            }
            config.job_id = job_id;
        }
        if let Some(timeout) = env::start_timeout(&var)? {
            config.start_timeout = timeout;
        }
        if let Some(timeout) = env::op_timeout(&var, "HVD_TCP_TIMEOUT")? {
            config.op_timeout = timeout;
        }
        if let Some(value) = var("HVD_TCP_SMALL_BYTES") {
            config.small_bytes =
                parse_bytes_in("HVD_TCP_SMALL_BYTES", &value, 0..=MAX_SMALL_BYTES)?;
        }
        if let Some(value) = var("HVD_TCP_BUSY_POLL") {
            let polling = parse_duration("HVD_TCP_BUSY_POLL", &value, TimeUnit::Milliseconds)?;
            config.busy_poll = Some(polling);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<TcpConfig> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TcpConfig::from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn variables_set_every_field() {
        let config = from(&[
            ("HOROVOD_GLOO_IFACE", "eth1"),
            ("HVD_JOB_ID", "job-7"),
            ("HVD_START_TIMEOUT", "2.5"),
            ("HVD_TCP_TIMEOUT", "10"),
            ("HVD_TCP_SMALL_BYTES", "128K"),
            ("HVD_TCP_BUSY_POLL", "50us"),
        ])
        .unwrap();
        assert_eq!(config.busy_poll, Some(Duration::from_micros(50)));
        assert_eq!(config.interface.as_deref(), Some("eth1"));
        assert_eq!(config.job_id, "job-7");
        assert_eq!(config.start_timeout, Duration::from_millis(2500));
        assert_eq!(config.op_timeout, Duration::from_secs(10));
        assert_eq!(config.small_bytes, 128 << 10);
    }

    #[test]
    fn hvd_iface_wins_over_its_horovod_alias() {
        let config = from(&[("HVD_IFACE", "eth0"), ("HOROVOD_GLOO_IFACE", "eth1")]).unwrap();
        assert_eq!(config.interface.as_deref(), Some("eth0"));
    }

    #[test]
    fn bad_values_name_the_variable_the_value_and_the_form() {
        let cases = [
            (
                ("HVD_START_TIMEOUT", "soon"),
                "invalid value \"soon\" for HVD_START_TIMEOUT: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in seconds), at most ten years",
            ),
            (
                ("HVD_TCP_TIMEOUT", "0"),
                "invalid value \"0\" for HVD_TCP_TIMEOUT: expected a positive duration such as 30, 2.5 or 5m",
            ),
            (
                // Beyond what a deadline can hold: refused, not a panic when waiting starts.
                ("HVD_TCP_TIMEOUT", "100000000000"),
                "invalid value \"100000000000\" for HVD_TCP_TIMEOUT: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in seconds), at most ten years",
            ),
            (
                ("HVD_TCP_BUSY_POLL", "always"),
                "invalid value \"always\" for HVD_TCP_BUSY_POLL: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in milliseconds), at most ten years",
            ),
            (
                ("HVD_TCP_SMALL_BYTES", "lots"),
                &format!(
                    "invalid value \"lots\" for HVD_TCP_SMALL_BYTES: expected {}",
                    hvd_core::units::BYTE_FORMS
                ),
            ),
            (
                ("HVD_TCP_SMALL_BYTES", "1G"),
                &format!(
                    "invalid value \"1G\" for HVD_TCP_SMALL_BYTES: expected at most 64M: {}",
                    hvd_core::units::BYTE_FORMS
                ),
            ),
        ];
        for ((name, value), expected) in cases {
            let err = from(&[(name, value)]).unwrap_err();
            assert_eq!(err.to_string(), expected);
        }
        let long = "j".repeat(MAX_JOB_ID + 1);
        assert_eq!(
            from(&[("HVD_JOB_ID", &long)]).unwrap_err().to_string(),
            format!("invalid value {long:?} for HVD_JOB_ID: expected at most 256 bytes of text")
        );
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let config = TcpConfig {
            secret: b"s3cret".to_vec(),
            ..TcpConfig::default()
        };
        let text = format!("{config:?}");
        assert!(text.contains("secret: <6 bytes>"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }
}
