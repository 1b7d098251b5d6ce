//! Which providers libfabric offers for hvd's needs, and the choice of one.
//!
//! hvd needs reliable datagram endpoints (`FI_EP_RDM`) with tagged messages. It supplies
//! operation contexts (`FI_CONTEXT`, `FI_CONTEXT2`) and registers local buffers when a
//! provider asks (`FI_MR_LOCAL`), so providers that need either are offered too.

use std::ffi::{CStr, CString, c_char};

use hvd_core::{Error, Result};

use crate::library::{Library, library};
use crate::sys::{self, fi_info};

/// Providers in the order hvd prefers them when none is named: hardware first.
pub const PREFERENCE: &[&str] = &["verbs", "efa", "shm", "tcp"];

/// One way libfabric can carry hvd's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    /// The provider, with its utility layers (`"tcp;ofi_rxm"`, `"shm"`, `"verbs;ofi_rxm"`).
    pub name: String,
    /// The fabric (for IP providers, a subnet).
    pub fabric: String,
    /// The domain (a NIC, an interface, or the host for `shm`).
    pub domain: String,
    /// Whether it needs buffers registered for local access (`FI_MR_LOCAL`).
    pub registers_memory: bool,
}

impl Provider {
    /// Whether a completion queue's wait descriptor wakes when a peer's bytes arrive:
    /// `tcp` and layers over it. Shared memory wakes no descriptor, and `sockets` gives
    /// none under manual progress: their ranks poll.
    pub fn wakes_by_descriptor(&self) -> bool {
        core_name(&self.name) == "tcp"
    }

    /// Whether the provider moves data through memory shared with the peer (`shm`), where
    /// a peer killed while holding a lock in its region hangs every later send to it.
    pub fn shares_memory(&self) -> bool {
        core_name(&self.name) == "shm"
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (fabric {}, domain {})",
            self.name, self.fabric, self.domain
        )
    }
}

/// Every provider and domain libfabric offers for hvd on this machine, in libfabric's
/// order; an error when libfabric cannot be loaded.
pub fn providers() -> Result<Vec<Provider>> {
    let list = InfoList::query(library()?, None)?;
    // libfabric lists a provider once per variant of its attributes; once is enough.
    let mut all: Vec<Provider> = Vec::new();
    for provider in list.iter().map(describe) {
        if !all.contains(&provider) {
            all.push(provider);
        }
    }
    Ok(all)
}

/// The result of `fi_getinfo`, freed on drop.
#[derive(Debug)]
pub(crate) struct InfoList {
    library: &'static Library,
    head: *mut fi_info,
}

impl InfoList {
    /// What libfabric offers for hvd's hints, from `provider` only when named.
    pub(crate) fn query(library: &'static Library, provider: Option<&str>) -> Result<InfoList> {
        let hints = Hints::new(library, provider)?;
        let mut head = std::ptr::null_mut();
        // SAFETY: `hints.info` is a valid fi_info from fi_dupinfo; `head` receives a list
        // this InfoList frees.
        let code = unsafe {
            (library.getinfo)(
                sys::API_VERSION,
                std::ptr::null(),
                std::ptr::null(),
                0,
                hints.info,
                &mut head,
            )
        };
        let list = InfoList { library, head };
        // -FI_ENODATA: nothing matches, which the caller reports with the names it wanted.
        if code != 0 && code != -(sys::FI_ENODATA as i32) {
            return Err(Error::Unsupported {
                backend: "rdma",
                what: format!(
                    "libfabric's fi_getinfo failed: {}",
                    library.strerror(code.into())
                ),
            });
        }
        Ok(list)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &fi_info> {
        // SAFETY: the list is libfabric's, alive until drop, linked through `next`.
        std::iter::successors(unsafe { self.head.as_ref() }, |info| unsafe {
            info.next.as_ref()
        })
    }

    /// A copy of `info` that outlives this list, freed by [`OwnedInfo`].
    pub(crate) fn keep(&self, info: &fi_info) -> Result<OwnedInfo> {
        // SAFETY: `info` is an entry of this live list. The copy's `next` is null.
        let copy = unsafe { (self.library.dupinfo)(info) };
        if copy.is_null() {
            return Err(Error::Unsupported {
                backend: "rdma",
                what: "copying libfabric's fi_info: out of memory".into(),
            });
        }
        Ok(OwnedInfo {
            library: self.library,
            info: copy,
        })
    }
}

impl Drop for InfoList {
    fn drop(&mut self) {
        if !self.head.is_null() {
            // SAFETY: the list came from fi_getinfo and is freed once.
            unsafe { (self.library.freeinfo)(self.head) }
        }
    }
}

/// One fi_info of our own, freed on drop.
#[derive(Debug)]
pub(crate) struct OwnedInfo {
    library: &'static Library,
    pub info: *mut fi_info,
}

impl Drop for OwnedInfo {
    fn drop(&mut self) {
        // SAFETY: `info` came from fi_dupinfo and is freed once.
        unsafe { (self.library.freeinfo)(self.info) }
    }
}

/// Hints for `fi_getinfo`, allocated by libfabric (`fi_allocinfo`) so that
/// `fi_freeinfo` frees the provider name we set.
struct Hints {
    library: &'static Library,
    info: *mut fi_info,
}

impl Hints {
    fn new(library: &'static Library, provider: Option<&str>) -> Result<Hints> {
        // SAFETY: fi_dupinfo(NULL) is fi_allocinfo: a zeroed fi_info with its attributes.
        let info = unsafe { (library.dupinfo)(std::ptr::null()) };
        let hints = Hints { library, info };
        // SAFETY: a non-null result has all attribute pointers set (fi_allocinfo).
        let Some(info) = (unsafe { info.as_mut() }) else {
            return Err(Error::Unsupported {
                backend: "rdma",
                what: "allocating libfabric hints: out of memory".into(),
            });
        };
        info.caps = u64::from(sys::FI_TAGGED | sys::FI_SEND | sys::FI_RECV);
        info.mode = sys::FI_CONTEXT | sys::FI_CONTEXT2;
        // SAFETY: attributes of a fresh fi_allocinfo are valid and zeroed.
        unsafe {
            (*info.ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
            let domain = &mut *info.domain_attr;
            domain.mr_mode = (sys::FI_MR_LOCAL
                | sys::FI_MR_VIRT_ADDR
                | sys::FI_MR_ALLOCATED
                | sys::FI_MR_PROV_KEY) as i32;
            domain.threading = sys::fi_threading_FI_THREAD_DOMAIN;
            domain.data_progress = sys::fi_progress_FI_PROGRESS_MANUAL;
            if let Some(name) = provider {
                (*info.fabric_attr).prov_name = duplicate(name)?;
            }
        }
        Ok(hints)
    }
}

impl Drop for Hints {
    fn drop(&mut self) {
        // SAFETY: from fi_dupinfo; frees the strdup'ed provider name too.
        unsafe { (self.library.freeinfo)(self.info) }
    }
}

/// A `malloc`ed copy of `text`, which `fi_freeinfo` may `free`.
fn duplicate(text: &str) -> Result<*mut c_char> {
    let c_text = CString::new(text).map_err(|_| Error::Config {
        name: "HVD_RDMA_PROVIDER".into(),
        value: text.into(),
        expected: "a provider name without NUL bytes".into(),
    })?;
    // SAFETY: a valid C string; the copy is owned by the hints.
    Ok(unsafe { libc::strdup(c_text.as_ptr()) })
}

fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: libfabric's attribute strings are NUL-terminated and live with the info.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn describe(info: &fi_info) -> Provider {
    // SAFETY: entries of fi_getinfo and fi_dupinfo carry valid attribute pointers.
    let (fabric, domain) = unsafe { (&*info.fabric_attr, &*info.domain_attr) };
    Provider {
        name: text(fabric.prov_name),
        fabric: text(fabric.name),
        domain: text(domain.name),
        registers_memory: domain.mr_mode & sys::FI_MR_LOCAL as i32 != 0,
    }
}

/// The core provider of a (possibly layered) name: `"tcp"` for `"tcp;ofi_rxm"`.
fn core_name(name: &str) -> &str {
    name.split(';').next().unwrap_or(name)
}

/// The fi_info to open: the first entry of `provider` when named, otherwise the first
/// of [`PREFERENCE`] that libfabric offers.
pub(crate) fn choose(provider: Option<&str>) -> Result<OwnedInfo> {
    let library = library()?;
    let list = InfoList::query(library, provider)?;
    let chosen = match provider {
        Some(_) => list.iter().next(),
        None => PREFERENCE.iter().find_map(|wanted| {
            list.iter()
                .find(|info| core_name(&describe(info).name) == *wanted)
        }),
    };
    match chosen {
        Some(info) => list.keep(info),
        None => Err(Error::Unsupported {
            backend: "rdma",
            what: match provider {
                Some(name) => format!(
                    "provider '{name}': libfabric ({}) offers it for no reliable tagged \
                     endpoint here (`fi_info -l` lists the providers)",
                    library.name
                ),
                None => format!(
                    "any of the providers {PREFERENCE:?}: libfabric ({}) offers none \
                     here (`fi_info -l` lists the providers)",
                    library.name
                ),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layered_providers_are_known_by_their_core() {
        assert_eq!(core_name("tcp;ofi_rxm"), "tcp");
        assert_eq!(core_name("shm"), "shm");
    }
}
