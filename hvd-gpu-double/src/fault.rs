//! Faults injected on demand (`HVD_GPU_DOUBLE_FAULTS`), counted per process.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::config::settings;

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

/// Calls counted so far, by counter name and rank (`None`: every rank together).
type Counts = HashMap<(String, Option<usize>), u64>;
static COUNTS: Mutex<Option<Counts>> = Mutex::new(None);

/// Counts one more event `name` for `rank` (and for the process) and returns both counts.
fn count(name: &str, rank: Option<usize>) -> (u64, u64) {
    let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
    let counts = counts.get_or_insert_with(HashMap::new);
    let mut bump = |key: Option<usize>| {
        let n = counts.entry((name.to_owned(), key)).or_insert(0);
        *n += 1;
        *n
    };
    let all = bump(None);
    let mine = rank.map_or(all, |r| bump(Some(r)));
    (all, mine)
}

fn matches(nth: u64, rank: Option<usize>, counted: (u64, u64)) -> bool {
    match rank {
        None => counted.0 == nth,
        Some(_) => counted.1 == nth,
    }
}

/// Whether this call of `function` (by rank `rank`'s communicator) must fail.
pub(crate) fn fails(function: &str, rank: Option<usize>) -> bool {
    let faults = &settings().faults;
    if faults.is_empty() {
        return false;
    }
    let counted = count(function, rank);
    faults.iter().any(|f| match f {
        Fault::Fail {
            function: name,
            nth,
            rank: wanted,
        } => {
            name == function && wanted.is_none_or(|w| Some(w) == rank) && {
                matches(*nth, *wanted, counted)
            }
        }
        _ => false,
    })
}

/// Whether this collective (run on a stream for `rank`) must stall, and how.
pub(crate) fn stall(rank: usize) -> Option<Stall> {
    let faults = &settings().faults;
    if faults.is_empty() {
        return None;
    }
    let counted = count("collective", Some(rank));
    faults.iter().find_map(|f| match *f {
        Fault::RemoteError { nth, rank: wanted }
            if wanted.is_none_or(|w| w == rank) && matches(nth, wanted, counted) =>
        {
            Some(Stall::RemoteError)
        }
        Fault::Hang { nth, rank: wanted }
            if wanted.is_none_or(|w| w == rank) && matches(nth, wanted, counted) =>
        {
            Some(Stall::Hang)
        }
        _ => None,
    })
}

/// Whether this allocation must fail with out of memory.
pub(crate) fn out_of_memory() -> bool {
    let faults = &settings().faults;
    if faults.is_empty() {
        return false;
    }
    let (all, _) = count("alloc", None);
    faults
        .iter()
        .any(|f| matches!(f, Fault::OutOfMemory { nth } if *nth == all))
}

/// The version `ncclGetVersion` reports.
pub(crate) fn nccl_version() -> i32 {
    settings()
        .faults
        .iter()
        .find_map(|f| match f {
            Fault::Version(code) => Some(*code),
            _ => None,
        })
        .unwrap_or(crate::config::NCCL_VERSION)
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
