//! Whether another process of the job still runs, for transports that share a host
//! with their peers and can watch them directly.

/// True when `pid` has exited: no such process, or a zombie waiting for its parent.
pub fn has_exited(pid: u32) -> bool {
    let Ok(id) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    if unsafe { libc::kill(id, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    // The state follows the command name, which is in parentheses and may hold anything.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rfind(')')?;
            stat[after + 1..]
                .split_whitespace()
                .next()
                .map(str::to_owned)
        })
        .is_some_and(|state| state == "Z" || state == "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_reaped_child_has_exited() {
        assert!(!has_exited(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(has_exited(pid));
    }

    #[test]
    fn an_unreaped_child_counts_as_exited() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !is_zombie(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(has_exited(pid));
        child.wait().unwrap();
    }
}
