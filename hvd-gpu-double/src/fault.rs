//! The faults one can ask for (`HVD_GPU_DOUBLE_FAULTS`) and how they are written;
//! `inject.rs` decides when each one strikes.

use std::collections::HashMap;

/// One fault to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The `nth` call of `function` (of rank `rank`'s communicator) fails.
    Fail {
        function: String,
        nth: u64,
        rank: Option<usize>,
    },
    /// The `nth` collective run on a stream raises `ncclRemoteError` and stalls.
    RemoteError { nth: u64, rank: Option<usize> },
    /// The `nth` collective run on a stream stalls silently.
    Hang { nth: u64, rank: Option<usize> },
    /// The `nth` allocation fails with out of memory.
    OutOfMemory { nth: u64 },
    /// `ncclGetVersion` reports this code.
    Version(i32),
}

/// What a collective about to run on a stream must do instead of running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stall {
    RemoteError,
    Hang,
}

impl Fault {
    pub(crate) fn parse_list(text: &str) -> Result<Vec<Fault>, String> {
        text.split(';')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(Fault::parse)
            .collect()
    }

    fn parse(entry: &str) -> Result<Fault, String> {
        let (kind, params) = entry.split_once(':').unwrap_or((entry, ""));
        let mut values: HashMap<&str, &str> = HashMap::new();
        for pair in params.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("'{pair}' in '{entry}' is not key=value"))?;
            values.insert(key.trim(), value.trim());
        }
        let number = |key: &str| -> Result<Option<u64>, String> {
            values
                .get(key)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| format!("{key}={v} in '{entry}' is not a number"))
                })
                .transpose()
        };
        let nth = number("nth")?.unwrap_or(1).max(1);
        let rank = number("rank")?.map(|r| r as usize);
        Ok(match kind.trim() {
            "fail" => Fault::Fail {
                function: values
                    .get("call")
                    .ok_or_else(|| format!("'{entry}' needs call=<entry point>"))?
                    .to_string(),
                nth,
                rank,
            },
            "remote-error" => Fault::RemoteError { nth, rank },
            "hang" => Fault::Hang { nth, rank },
            "oom" => Fault::OutOfMemory { nth },
            "version" => Fault::Version(
                number("code")?.ok_or_else(|| format!("'{entry}' needs code=<version>"))? as i32,
            ),
            other => {
                return Err(format!(
                    "unknown fault '{other}' (fail, remote-error, hang, oom, version)"
                ));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_lists_parse_and_bad_ones_say_why() {
        let faults = Fault::parse_list("fail:call=ncclGroupEnd,nth=2,rank=1; hang:nth=3").unwrap();
        assert_eq!(
            faults,
            [
                Fault::Fail {
                    function: "ncclGroupEnd".into(),
                    nth: 2,
                    rank: Some(1)
                },
                Fault::Hang { nth: 3, rank: None }
            ]
        );
        assert_eq!(
            Fault::parse_list("explode").unwrap_err(),
            "unknown fault 'explode' (fail, remote-error, hang, oom, version)"
        );
        assert_eq!(
            Fault::parse_list("fail:nth=1").unwrap_err(),
            "'fail:nth=1' needs call=<entry point>"
        );
    }
}
