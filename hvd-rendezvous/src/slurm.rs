//! Where rank 0 of a Slurm job step spanning several nodes serves the rendezvous store:
//! on the step's first node, at a port derived from the job and step ids.

use hvd_core::{Error, Result};

/// The first host of a Slurm node list: `node[07-09,12],gpu1` gives `node07`.
pub fn first_node(list: &str) -> Option<String> {
    let list = list.trim();
    let end = list.find([',', '[']).unwrap_or(list.len());
    let prefix = &list[..end];
    if list[end..].starts_with('[') {
        let inner = &list[end + 1..list[end..].find(']')? + end];
        let first = inner.split([',', '-']).next()?;
        return Some(format!("{prefix}{first}"));
    }
    (!prefix.is_empty()).then(|| prefix.to_string())
}

/// Ports from this base up are used, one per job step, so that several jobs' rank 0 on
/// one node do not collide (`HVD_STORE_PORT` overrides).
const PORT_BASE: u64 = 20000;
const PORT_SPAN: u64 = 20000;

/// `MASTER_ADDR`/`MASTER_PORT` for a multi-node Slurm step, None when the job is not one.
pub fn master(rank: usize) -> Result<Option<(String, u16)>> {
    let var = |name: &str| std::env::var(name).ok();
    let nodes = var("SLURM_STEP_NUM_NODES").or_else(|| var("SLURM_NNODES"));
    if nodes.as_deref().is_none_or(|n| n.trim() == "1") {
        return Ok(None);
    }
    let (Some(job), Some(list)) = (
        var("SLURM_JOB_ID"),
        var("SLURM_STEP_NODELIST").or_else(|| var("SLURM_JOB_NODELIST")),
    ) else {
        return Ok(None);
    };
    let Some(first) = first_node(&list) else {
        return Err(Error::Config {
            name: "SLURM_STEP_NODELIST".into(),
            value: list,
            expected: "a Slurm node list such as node[01-04]".into(),
        });
    };
    if rank == 0
        && let Some(here) = var("SLURMD_NODENAME")
        && here != first
    {
        return Err(Error::Config {
            name: "SLURMD_NODENAME".into(),
            value: here,
            expected: format!(
                "the step's first node {first} for rank 0, which serves the rendezvous store (use block distribution, or set MASTER_ADDR and MASTER_PORT)"
            ),
        });
    }
    let step: u64 = var("SLURM_STEP_ID")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let job_id: u64 = job.trim().parse().unwrap_or(0);
    let port = PORT_BASE + (job_id.wrapping_mul(31).wrapping_add(step)) % PORT_SPAN;
    Ok(Some((first, port as u16)))
}

#[cfg(test)]
mod tests {
    use super::first_node;

    #[test]
    fn the_first_node_of_every_list_form() {
        assert_eq!(first_node("node07").as_deref(), Some("node07"));
        assert_eq!(first_node("node[07-09,12],gpu1").as_deref(), Some("node07"));
        assert_eq!(first_node("a1,b2").as_deref(), Some("a1"));
        assert_eq!(first_node("rack2-n[3,5]").as_deref(), Some("rack2-n3"));
        assert_eq!(first_node("n[1-2"), None);
        assert_eq!(first_node(""), None);
    }
}
