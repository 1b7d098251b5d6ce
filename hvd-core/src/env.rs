//! Environment variables, with Horovod's names accepted as aliases.
//!
//! Every `HVD_*` variable may also be given as `HOROVOD_*` (the same suffix), so that job
//! scripts written for Horovod keep working; when both are set, `HVD_*` wins.

use std::str::FromStr;

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
