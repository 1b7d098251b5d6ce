//! Whether the process of a peer rank still runs.

pub(crate) use hvd_core::process::has_exited;

/// True when `pid` can be watched from here: another process this one can see. Ranks in
/// another pid namespace cannot be, and are left to the timeout.
pub(crate) fn can_watch(pid: u32) -> bool {
    pid != std::process::id() && !has_exited(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_cannot_be_watched_and_a_reaped_child_has_exited() {
        assert!(!can_watch(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!can_watch(pid));
    }
}
