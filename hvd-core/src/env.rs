//! Environment variables, with Horovod's names accepted as aliases.
//!
//! Every `HVD_*` variable may also be given as `HOROVOD_*` (the same suffix), so that job
//! scripts written for Horovod keep working; when both are set, `HVD_*` wins.

use std::str::FromStr;
use std::time::Duration;

use crate::units::parse_timeout;
use crate::{Error, Result};

/// The job's shared secret, `HVD_SECRET`, which every connection between ranks and to the
/// rendezvous store proves it holds (see [`auth`](crate::auth)); hvdrun generates one per
/// job. Unset, it is the empty secret: connections are still checked for protocol and
/// job, but anyone who can reach the ports can join. Its bytes are taken as they are, so
/// a secret need not be UTF-8. The one place that reads the variable, so that every
/// transport and the store agree on it.
pub fn job_secret() -> Vec<u8> {
    std::env::var_os("HVD_SECRET")
        .map(std::ffi::OsString::into_encoded_bytes)
        .unwrap_or_default()
}

/// How long an operation waits for a peer that makes no progress, when nothing says
/// otherwise.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long forming a group waits for every rank, when nothing says otherwise.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

/// The job-wide operation timeout's variables, in order: `HVD_TIMEOUT`, and Horovod's
/// `HOROVOD_GLOO_TIMEOUT_SECONDS`.
pub const TIMEOUT_VARS: [&str; 2] = ["HVD_TIMEOUT", "HOROVOD_GLOO_TIMEOUT_SECONDS"];

/// The operation timeout of a transport, read from `var` (the process environment, or a
/// table in tests): the transport's own variable (`HVD_TCP_TIMEOUT`) when set, else the
/// job's [`TIMEOUT_VARS`]; `None` when neither is, for the transport's default
/// ([`DEFAULT_OP_TIMEOUT`] for most). One value thus governs every transport of a job,
/// hierarchical jobs included, and each can still be overridden.
pub fn op_timeout(
    var: impl Fn(&str) -> Option<String>,
    transport_var: &str,
) -> Result<Option<Duration>> {
    first_timeout(&var, &[transport_var, TIMEOUT_VARS[0], TIMEOUT_VARS[1]])
}

/// How long forming a group may take: `HVD_START_TIMEOUT` (Horovod's
/// `HOROVOD_START_TIMEOUT`); `None` when unset, for [`DEFAULT_START_TIMEOUT`].
pub fn start_timeout(var: impl Fn(&str) -> Option<String>) -> Result<Option<Duration>> {
    first_timeout(&var, &["HVD_START_TIMEOUT", "HOROVOD_START_TIMEOUT"])
}

fn first_timeout(
    var: &impl Fn(&str) -> Option<String>,
    names: &[&str],
) -> Result<Option<Duration>> {
    names
        .iter()
        .find_map(|name| var(name).map(|value| parse_timeout(name, &value)))
        .transpose()
}

/// The value of `HVD_<suffix>` or else `HOROVOD_<suffix>`, with the name it came from.
pub fn lookup(suffix: &str) -> Option<(String, String)> {
    first_set(&[format!("HVD_{suffix}"), format!("HOROVOD_{suffix}")])
}

/// The first of `names` that is set, with its value.
pub fn first_set<S: AsRef<str>>(names: &[S]) -> Option<(String, String)> {
    names.iter().find_map(|name| {
        let name = name.as_ref();
        std::env::var(name)
            .ok()
            .map(|value| (name.to_string(), value))
    })
}

/// Parses `HVD_<suffix>` (or its alias) if set; a bad value is an error naming the
/// variable, the value and `expected`.
pub fn parse<T: FromStr>(suffix: &str, expected: &str) -> Result<Option<T>> {
    parse_first(
        &[format!("HVD_{suffix}"), format!("HOROVOD_{suffix}")],
        expected,
    )
    .map(|found| found.map(|(_, value)| value))
}

/// Parses the first of `names` that is set, returning its name too; a bad value is an
/// error naming the variable, the value and `expected`.
pub fn parse_first<T: FromStr, S: AsRef<str>>(
    names: &[S],
    expected: &str,
) -> Result<Option<(String, T)>> {
    let Some((name, value)) = first_set(names) else {
        return Ok(None);
    };
    match value.trim().parse() {
        Ok(parsed) => Ok(Some((name, parsed))),
        Err(_) => Err(Error::Config {
            name,
            value,
            expected: expected.into(),
        }),
    }
}

/// `HVD_<suffix>` (or its alias) as a yes/no switch, if set; a value that is neither is
/// an error naming the variable.
pub fn flag(suffix: &str) -> Result<Option<bool>> {
    let Some((name, value)) = lookup(suffix) else {
        return Ok(None);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" | "" => Ok(Some(false)),
        _ => Err(Error::Config {
            name,
            value,
            expected: "1/true/yes/on or 0/false/no/off".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let table: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| table.get(name).cloned()
    }

    #[test]
    fn a_transport_override_wins_over_the_job_timeout() {
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(op_timeout(vars(&[]), "HVD_TCP_TIMEOUT").unwrap(), None);
        let job = vars(&[("HVD_TIMEOUT", "2"), ("HOROVOD_GLOO_TIMEOUT_SECONDS", "9")]);
        assert_eq!(op_timeout(&job, "HVD_SHM_TIMEOUT").unwrap(), secs(2));
        let horovod = vars(&[("HOROVOD_GLOO_TIMEOUT_SECONDS", "9")]);
        assert_eq!(op_timeout(horovod, "HVD_SHM_TIMEOUT").unwrap(), secs(9));
        let both = vars(&[("HVD_TIMEOUT", "2"), ("HVD_TCP_TIMEOUT", "5")]);
        assert_eq!(op_timeout(&both, "HVD_TCP_TIMEOUT").unwrap(), secs(5));
        assert_eq!(op_timeout(&both, "HVD_RDMA_TIMEOUT").unwrap(), secs(2));
        assert_eq!(
            start_timeout(vars(&[("HOROVOD_START_TIMEOUT", "7")])).unwrap(),
            secs(7)
        );
    }

    #[test]
    fn a_bad_timeout_names_the_variable_it_came_from() {
        let bad = vars(&[("HVD_TIMEOUT", "soon")]);
        assert_eq!(
            op_timeout(bad, "HVD_TCP_TIMEOUT").unwrap_err().to_string(),
            "invalid value \"soon\" for HVD_TIMEOUT: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in seconds), at most ten years"
        );
    }
}
