//! Several ranks on one GPU: a host with more local ranks than devices (a test machine
//! with one GPU, say). NCCL 2.28 refuses two ranks of a communicator on the same device
//! of one host ("Duplicate GPU detected"); NCCL 2.30 allows it when
//! `NCCL_MULTI_RANK_GPU_ENABLE=1`. NCCL tells hosts apart by a hash of `NCCL_HOSTID`
//! (else the host's name), read once per process at its first communicator. So before
//! hvd's first NCCL call, a rank that shares its device gets a host id of its own (NCCL
//! then connects the ranks as if over the network), or, on NCCL 2.30 and later, the
//! setting that allows sharing. Variables the user set are left alone.

use crate::library::Version;

/// The first NCCL that lets ranks share a device when asked to.
const SHARING: Version = Version {
    major: 2,
    minor: 30,
    patch: 0,
};

/// What this rank sets so that NCCL accepts ranks sharing its device: a variable and its
/// value, or none when no rank shares it or the user already chose.
pub(crate) fn setting(
    local_rank: usize,
    local_size: usize,
    devices: u32,
    version: Version,
    is_set: impl Fn(&str) -> bool,
) -> Option<(&'static str, String)> {
    if local_size <= devices as usize {
        return None;
    }
    let (name, value) = if version >= SHARING {
        ("NCCL_MULTI_RANK_GPU_ENABLE", "1".to_owned())
    } else {
        (
            "NCCL_HOSTID",
            format!("{}-hvd-local-rank-{local_rank}", hostname()),
        )
    };
    (!is_set(name) && !is_set("NCCL_HOSTID")).then_some((name, value))
}

/// The host's name (and boot id, as NCCL adds), so that ids stay unique across hosts.
fn hostname() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let host = read("/proc/sys/kernel/hostname");
    let boot = read("/proc/sys/kernel/random/boot_id");
    format!("{}{}", host.trim(), boot.trim())
}

/// Sets [`setting`]'s variable for this process, once, before its first NCCL call; local
/// rank 0 says so in one log line.
pub(crate) fn share_devices(local_rank: usize, local_size: usize, devices: u32, version: Version) {
    let Some((name, value)) = setting(local_rank, local_size, devices, version, |name| {
        std::env::var_os(name).is_some()
    }) else {
        return;
    };
    // SAFETY: called while the rank forms its first communicator, before NCCL reads its
    // environment; hvd's other threads do not read the environment meanwhile.
    unsafe { std::env::set_var(name, &value) };
    if local_rank == 0 {
        tracing::info!(
            "{local_size} local ranks share {devices} GPU(s): NCCL {version} accepts that \
             only with {}",
            match name {
                "NCCL_HOSTID" => "a host id per rank, so each rank sets NCCL_HOSTID of its own",
                _ => "NCCL_MULTI_RANK_GPU_ENABLE=1, which each rank sets",
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2_28: Version = Version {
        major: 2,
        minor: 28,
        patch: 9,
    };
    const V2_30: Version = Version {
        major: 2,
        minor: 30,
        patch: 7,
    };
    const UNSET: fn(&str) -> bool = |_| false;

    #[test]
    fn ranks_that_share_a_gpu_get_host_ids_of_their_own_before_nccl_2_30() {
        let (name, first) = setting(0, 2, 1, V2_28, UNSET).unwrap();
        let (_, second) = setting(1, 2, 1, V2_28, UNSET).unwrap();
        assert_eq!(name, "NCCL_HOSTID");
        assert!(first.ends_with("-hvd-local-rank-0"), "{first}");
        assert!(second.ends_with("-hvd-local-rank-1"), "{second}");
    }

    #[test]
    fn nccl_2_30_is_told_to_allow_sharing() {
        assert_eq!(
            setting(3, 4, 2, V2_30, UNSET),
            Some(("NCCL_MULTI_RANK_GPU_ENABLE", "1".to_owned()))
        );
    }

    #[test]
    fn a_gpu_per_rank_or_the_users_own_choice_changes_nothing() {
        assert_eq!(setting(1, 2, 2, V2_28, UNSET), None);
        assert_eq!(setting(1, 2, 1, V2_28, |n| n == "NCCL_HOSTID"), None);
        assert_eq!(setting(1, 2, 1, V2_30, |n| n == "NCCL_HOSTID"), None);
        assert_eq!(
            setting(1, 2, 1, V2_30, |n| n == "NCCL_MULTI_RANK_GPU_ENABLE"),
            None
        );
    }
}
