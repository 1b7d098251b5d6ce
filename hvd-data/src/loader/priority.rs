//! The decode threads' CPU priority, below the training loop's: when the host's cores are
//! all busy, a thread of the loop that wakes (the allreduce's, the one that launches the
//! GPU's work) takes a core from a decoder at once instead of waiting its turn, and the
//! decoders still get every cycle the loop leaves.

use std::fmt;
use std::str::FromStr;

/// How the decode threads' CPU time ranks against the training loop's threads.
///
/// Measured on 2 cores with 4 ranks, a loader that keeps up, 10 alternated runs each
/// (`hvd-bench data-gap --np 4`, compute slept as a GPU's would be): against synthetic
/// input the job lost 5.5 % of its throughput with decoders 10 `nice` steps down and
/// 1.1 % with them idle, almost all of the difference an allreduce that waited for a
/// core. A loader that cannot keep up (`--compute-ms 10`) made 7 % fewer images idle than
/// at nice 10. Idle decoders also get nothing while other threads at normal priority keep
/// every core busy: another job on the host, or compute on the CPU (OpenMP's threads spin
/// between parallel regions), so the default stays [`Nice`](Self::Nice)`(10)`, and
/// [`Auto`](Self::Auto) is for jobs whose compute runs on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodePriority {
    /// [`Idle`](Self::Idle), until a tuning ([`Loader::tune`](super::Loader::tune))
    /// finds this rank's share of the cores cannot feed it: the epochs started after it
    /// run at [`Nice`](Self::Nice)`(10)`, decoding being what the job waits for, until a
    /// tuning finds 20 % to spare. A loader never tuned (fixed threads) stays idle.
    Auto,
    /// Linux's `SCHED_IDLE`: a decoder runs on a core only while no other thread wants
    /// it, and gives it up the moment one wakes.
    Idle,
    /// This many `nice` steps (0 to 19) below the loop: the decoders take a smaller
    /// share of a busy core; 0 keeps them equal to the loop. The default is 10.
    Nice(u8),
}

impl Default for DecodePriority {
    fn default() -> Self {
        DecodePriority::Nice(10)
    }
}

/// The nice steps [`DecodePriority::Auto`] takes when the loader cannot keep up.
const BEHIND_NICE: u8 = 10;

/// How far capacity must exceed demand before a rank found behind idles again. Decode
/// times are wall times: idle decoders pushed off their cores by the loop measure slower
/// than decoders at nice 10, so a rank near the line would otherwise switch every epoch.
const CAUGHT_UP: f64 = 1.2;

/// Whether a rank is behind after `tuning`, given whether it was.
pub(crate) fn behind(was_behind: bool, tuning: &super::Tuning) -> bool {
    if was_behind {
        tuning.capacity < CAUGHT_UP * tuning.demand
    } else {
        !tuning.keeps_up()
    }
}

impl DecodePriority {
    /// What an epoch's threads run at, `behind` saying whether the last tuning found
    /// this rank short of decoding.
    pub(crate) fn resolve(self, behind: bool) -> DecodePriority {
        match self {
            DecodePriority::Auto if behind => DecodePriority::Nice(BEHIND_NICE),
            DecodePriority::Auto => DecodePriority::Idle,
            chosen => chosen,
        }
    }

    /// Why `self` cannot be used, if it cannot.
    pub(crate) fn invalid(self) -> Option<String> {
        match self {
            DecodePriority::Nice(steps) if steps > 19 => Some(format!("nice {steps}: {RANGE}")),
            _ => None,
        }
    }
}

const RANGE: &str = "Linux's nice steps go from 0 (the training loop's own priority) to 19";

/// `auto`, `idle`, or nice steps `0` to `19`.
impl FromStr for DecodePriority {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let priority = match text.trim() {
            "auto" => DecodePriority::Auto,
            "idle" => DecodePriority::Idle,
            steps => DecodePriority::Nice(steps.parse().map_err(|_| {
                format!("{text:?}: expected auto, idle, or the nice steps below the training loop (0 to 19)")
            })?),
        };
        match priority.invalid() {
            Some(reason) => Err(reason),
            None => Ok(priority),
        }
    }
}

impl fmt::Display for DecodePriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodePriority::Auto => f.write_str("auto"),
            DecodePriority::Idle => f.write_str("idle"),
            DecodePriority::Nice(steps) => write!(f, "{steps}"),
        }
    }
}

/// Lowers the calling thread's priority to `priority` (resolved: not `Auto`). Where that
/// fails, or off Linux, the thread keeps its priority: it decodes as fast, only without
/// giving way.
pub(crate) fn lower_this_thread(priority: DecodePriority) {
    let lowered = match priority {
        DecodePriority::Nice(0) | DecodePriority::Auto => Ok(()),
        DecodePriority::Nice(steps) => lower_nice(steps),
        DecodePriority::Idle => idle(),
    };
    if let Err(e) = lowered {
        tracing::debug!("a decode thread keeps the training loop's priority: {e}");
    }
}

#[cfg(target_os = "linux")]
fn lower_nice(steps: u8) -> std::io::Result<()> {
    // SAFETY: gettid has no preconditions; get/setpriority read and set the nice value of
    // this thread (a thread is a process to them on Linux) and touch no memory of ours.
    unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        // getpriority can return -1 as a value: errno tells an error apart.
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, thread);
        if now == -1 && *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let lower = (now + i32::from(steps)).min(19);
        match libc::setpriority(libc::PRIO_PROCESS, thread, lower) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

#[cfg(target_os = "linux")]
fn idle() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; the call reads `param` and nothing else. Any
    // thread may lower itself to SCHED_IDLE without privileges.
    match unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_nice(_steps: u8) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn idle() -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_idles_until_a_tuning_finds_the_rank_behind() {
        use DecodePriority::*;
        assert_eq!(Auto.resolve(false), Idle);
        assert_eq!(Auto.resolve(true), Nice(10));
        assert_eq!(Idle.resolve(true), Idle);
        assert_eq!(Nice(3).resolve(false), Nice(3));
    }

    #[test]
    fn a_rank_found_behind_idles_again_only_well_ahead() {
        let tuning = |capacity: f64| super::super::Tuning {
            threads: 1,
            share: 1,
            prefetch: 2,
            threads_needed: 1,
            capacity,
            demand: 100.0,
        };
        assert!(behind(false, &tuning(99.0)));
        assert!(!behind(false, &tuning(100.0)));
        assert!(behind(true, &tuning(110.0)), "not yet well ahead");
        assert!(!behind(true, &tuning(120.0)));
    }

    #[test]
    fn priorities_are_read_and_written_as_users_give_them() {
        use DecodePriority::*;
        for (text, priority) in [
            ("auto", Auto),
            ("idle", Idle),
            ("0", Nice(0)),
            ("19", Nice(19)),
        ] {
            assert_eq!(text.parse::<DecodePriority>(), Ok(priority));
            assert_eq!(priority.to_string(), text);
        }
        assert_eq!(
            "20".parse::<DecodePriority>().unwrap_err(),
            "nice 20: Linux's nice steps go from 0 (the training loop's own priority) to 19"
        );
        assert_eq!(
            "low".parse::<DecodePriority>().unwrap_err(),
            "\"low\": expected auto, idle, or the nice steps below the training loop (0 to 19)"
        );
        assert_eq!(DecodePriority::default(), Nice(10));
    }
}
