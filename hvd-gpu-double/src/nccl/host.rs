//! Which host and device a rank is on, and NCCL's refusal of two ranks of one
//! communicator on the same GPU of one host. NCCL 2.28 refuses it outright ("Duplicate
//! GPU detected"); NCCL 2.30 allows it with `NCCL_MULTI_RANK_GPU_ENABLE=1`. NCCL tells
//! hosts apart by a hash of `NCCL_HOSTID` (else the host's name and boot id), read once
//! per process: ranks given host ids of their own pass the check.
//!
//! Only ranks in different processes are compared: hvd's in-process tests run several
//! ranks on one device, which real NCCL refuses too, but no host id can change that.

use std::sync::OnceLock;

use super::{Failure, INVALID_USAGE};

/// The first NCCL that lets ranks share a GPU (when asked to).
const SHARING_VERSION: i32 = 23000;

/// This process's host hash, computed once as NCCL does.
pub(crate) fn host_hash() -> u64 {
    static HASH: OnceLock<u64> = OnceLock::new();
    *HASH.get_or_init(|| {
        let name = std::env::var("NCCL_HOSTID").unwrap_or_else(|_| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let boot =
                std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
            format!("{}{}", host.trim(), boot.trim())
        });
        // FNV-1a: any stable hash will do, as long as every process computes the same.
        name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
    })
}

/// Where one rank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub pid: u32,
    pub host: u64,
    pub device: u32,
}

/// NCCL's check of the ranks' places at initialisation, from rank `me`'s side.
pub(crate) fn check_devices(me: usize, places: &[Place], version: i32) -> Result<(), Failure> {
    let mine = places[me];
    let shared = places.iter().enumerate().find(|(i, p)| {
        *i != me && p.pid != mine.pid && p.host == mine.host && p.device == mine.device
    });
    let Some((other, _)) = shared else {
        return Ok(());
    };
    if version < SHARING_VERSION {
        return Err(Failure::new(
            INVALID_USAGE,
            format!(
                "Duplicate GPU detected : rank {me} and rank {other} both on CUDA device {:x}",
                mine.device
            ),
        ));
    }
    if std::env::var("NCCL_MULTI_RANK_GPU_ENABLE").is_ok_and(|v| v.trim() == "1") {
        return Ok(());
    }
    Err(Failure::new(
        INVALID_USAGE,
        "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to \
         enable this configuration.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: u64 = 7;

    fn place(pid: u32, host: u64, device: u32) -> Place {
        Place { pid, host, device }
    }

    #[test]
    fn nccl_2_28_refuses_two_processes_on_one_gpu_of_one_host() {
        let places = [place(10, HOST, 0), place(11, HOST, 0)];
        let refused = check_devices(1, &places, 22809).unwrap_err();
        assert_eq!(refused.code, INVALID_USAGE);
        assert_eq!(
            refused.message,
            "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 0"
        );
    }

    #[test]
    fn host_ids_of_their_own_or_other_devices_pass() {
        let own_hosts = [place(10, HOST, 0), place(11, HOST + 1, 0)];
        assert_eq!(check_devices(0, &own_hosts, 22809), Ok(()));
        let own_devices = [place(10, HOST, 0), place(11, HOST, 1)];
        assert_eq!(check_devices(0, &own_devices, 22809), Ok(()));
        let one_process = [place(10, HOST, 0), place(10, HOST, 0)];
        assert_eq!(check_devices(0, &one_process, 22809), Ok(()));
    }

    #[test]
    fn nccl_2_30_asks_for_its_setting() {
        let places = [place(10, HOST, 0), place(11, HOST, 0)];
        let refused = check_devices(0, &places, 23007).unwrap_err();
        assert!(
            refused
                .message
                .starts_with("Multiple Ranks are using the same GPU/Partition."),
            "{}",
            refused.message
        );
    }
}
