//! Environment variables, with Horovod's names accepted as aliases.
//!
//! Every `HVD_*` variable may also be given as `HOROVOD_*` (the same suffix), so that job
//! scripts written for Horovod keep working; when both are set, `HVD_*` wins.

use std::str::FromStr;

use hvd_core::{Error, Result};

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
    let Some((name, value)) = lookup(suffix) else {
        return Ok(None);
    };
    value.trim().parse().map(Some).map_err(|_| Error::Config {
        name,
        value,
        expected: expected.into(),
    })
}
