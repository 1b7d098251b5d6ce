//! One rank's libfabric endpoint: fabric, domain, completion queue, address vector and a
//! reliable datagram endpoint, closed in reverse order on drop.
//!
//! Messages go through bounce buffers the endpoint owns, one per operation in flight
//! ([`Slot`]), registered when the provider needs local registration (`FI_MR_LOCAL`);
//! each slot also holds the `fi_context2` the provider may use for the operation, and
//! that context's address is how a completion finds its slot.

use std::ffi::{c_int, c_void};
use std::ptr;

use hvd_core::{Error, Result};

use crate::info::{OwnedInfo, Provider, describe};
use crate::library::Library;
use crate::sys::{self, fi_addr_t, fi_context2, fid_av, fid_cq, fid_domain, fid_ep, fid_fabric};

mod waiting;

pub(crate) use waiting::Blocked;

/// Completions read per `fi_cq_read`.
const CQ_BATCH: usize = 16;

/// What a posting or reading call of libfabric answered.
pub(crate) type Code = isize;

/// `-FI_EAGAIN`: the provider's queue is full until completions are read.
pub(crate) const AGAIN: Code = -(sys::FI_EAGAIN as isize);

/// A bounce buffer and the context of the operation using it.
#[derive(Debug)]
struct Slot {
    context: Box<fi_context2>,
    buffer: Vec<u8>,
    /// Its registration, when the provider needs one (null otherwise).
    mr: *mut sys::fid_mr,
}

/// A finished operation, by slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completion {
    pub slot: usize,
    /// Bytes received (receives only).
    pub len: usize,
}

/// An operation that failed in the provider.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    pub slot: Option<usize>,
    pub code: i32,
    /// libfabric's text and the provider's own.
    pub text: String,
}

#[derive(Debug)]
pub(crate) struct Endpoint {
    library: &'static Library,
    pub provider: Provider,
    info: OwnedInfo,
    fabric: *mut fid_fabric,
    domain: *mut fid_domain,
    cq: *mut fid_cq,
    av: *mut fid_av,
    ep: *mut fid_ep,
    /// libfabric's address of each rank, by rank.
    addresses: Vec<fi_addr_t>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// The largest message the provider carries.
    pub max_message: usize,
    /// The most pieces one vectored send may have.
    pub iov_limit: usize,
    /// The most pieces one vectored receive may have.
    pub rx_iov_limit: usize,
    /// Whether messages go only through registered bounce buffers: when the provider
    /// needs local registration, or when asked to.
    pub registers: bool,
    /// Registrations so far, which makes each one's key unique.
    registrations: u64,
    /// The descriptor the completion queue's wait object signals, where the provider's
    /// progress rides on sockets: a waiting rank blocks on it instead of napping.
    wait_fd: Option<c_int>,
}

// SAFETY: the endpoint is opened with FI_THREAD_DOMAIN, which allows any thread to use
// it as long as calls are serialised; the owner keeps it behind a mutex.
unsafe impl Send for Endpoint {}

impl Endpoint {
    /// Opens everything up to an enabled endpoint with an address vector for `size` ranks;
    /// `register` registers the bounce buffers even where the provider does not need it.
    pub(crate) fn open(
        library: &'static Library,
        info: OwnedInfo,
        size: usize,
        register: bool,
    ) -> Result<Self> {
        // SAFETY: `info.info` is a valid fi_info with its attributes.
        let (provider, max_message, iov_limit, rx_iov_limit) = unsafe {
            let info = &*info.info;
            let (tx, rx) = (&*info.tx_attr, &*info.rx_attr);
            let max_message = (*info.ep_attr).max_msg_size;
            (describe(info), max_message, tx.iov_limit, rx.iov_limit)
        };
        let mut endpoint = Endpoint {
            library,
            info,
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
            cq: ptr::null_mut(),
            av: ptr::null_mut(),
            ep: ptr::null_mut(),
            addresses: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            max_message,
            iov_limit,
            rx_iov_limit,
            registers: register || provider.registers_memory,
            registrations: 0,
            wait_fd: None,
            provider,
        };
        endpoint.build(size)?;
        Ok(endpoint)
    }

    fn build(&mut self, size: usize) -> Result<()> {
        let info = self.info.info;
        // SAFETY: every call gets live objects opened just before it, and out-pointers
        // into `self`, whose Drop closes whatever was opened if a later step fails.
        unsafe {
            let code =
                (self.library.fabric)((*info).fabric_attr, &mut self.fabric, ptr::null_mut());
            self.check("fi_fabric", code)?;
            let code = sys::fi_domain(self.fabric, info, &mut self.domain);
            self.check("fi_domain", code)?;
            self.open_cq()?;
            let mut av_attr: sys::fi_av_attr = std::mem::zeroed();
            av_attr.type_ = sys::fi_av_type_FI_AV_TABLE;
            av_attr.count = size;
            let code = sys::fi_av_open(self.domain, &mut av_attr, &mut self.av);
            self.check("fi_av_open", code)?;
            let code = sys::fi_endpoint(self.domain, info, &mut self.ep);
            self.check("fi_endpoint", code)?;
            let both = u64::from(sys::FI_TRANSMIT | sys::FI_RECV);
            let code = sys::fi_ep_bind(self.ep, ptr::addr_of_mut!((*self.cq).fid), both);
            self.check("fi_ep_bind (completion queue)", code)?;
            let code = sys::fi_ep_bind(self.ep, ptr::addr_of_mut!((*self.av).fid), 0);
            self.check("fi_ep_bind (address vector)", code)?;
            let code = sys::fi_enable(self.ep);
            self.check("fi_enable", code)?;
        }
        Ok(())
    }

    fn check(&self, call: &str, code: c_int) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        Err(self.error(call, code.into()))
    }

    /// A failed set-up call, named with the provider and libfabric's text.
    pub(crate) fn error(&self, call: &str, code: i64) -> Error {
        Error::Io {
            context: format!("libfabric provider {}: {call}", self.provider),
            message: self.library.strerror(code),
            kind: std::io::ErrorKind::Other,
        }
    }

    /// libfabric's text for an error code.
    pub(crate) fn strerror(&self, code: i64) -> String {
        self.library.strerror(code)
    }

    /// This endpoint's address, for the other ranks' address vectors.
    pub(crate) fn name(&self) -> Result<Vec<u8>> {
        let mut name = vec![0u8; 256];
        let mut len = name.len();
        // SAFETY: `ep` is enabled; the buffer holds `len` bytes.
        let mut code = unsafe { sys::fi_getname(self.ep, name.as_mut_ptr().cast(), &mut len) };
        if code == -(sys::FI_ETOOSMALL as c_int) {
            name.resize(len, 0);
            // SAFETY: as above, with the size the provider asked for.
            code = unsafe { sys::fi_getname(self.ep, name.as_mut_ptr().cast(), &mut len) };
        }
        self.check("fi_getname", code)?;
        name.truncate(len);
        Ok(name)
    }

    /// Fills the address vector with every rank's address, in rank order.
    pub(crate) fn insert(&mut self, names: &[Vec<u8>]) -> Result<()> {
        let mut addresses = vec![sys::FI_ADDR_UNSPEC; names.len()];
        // libfabric reads as many bytes as its provider's addresses take (a string one up
        // to its NUL) from what it is given: a peer's record that is shorter than this
        // rank's own address is padded with zeros, so nothing is read past its end.
        let own = self.name()?.len();
        for (name, address) in names.iter().zip(&mut addresses) {
            let mut padded = name.clone();
            padded.resize(name.len().max(own) + 1, 0);
            // SAFETY: `padded` holds at least as many bytes as this provider's own address
            // and ends in a NUL.
            let inserted =
                unsafe { sys::fi_av_insert(self.av, padded.as_ptr().cast(), 1, address) };
            if inserted != 1 {
                return Err(self.error(
                    "fi_av_insert",
                    if inserted < 0 {
                        inserted.into()
                    } else {
                        -i64::from(sys::FI_EINVAL)
                    },
                ));
            }
        }
        self.addresses = addresses;
        Ok(())
    }

    /// A free slot whose buffer holds at least `len` bytes.
    pub(crate) fn acquire(&mut self, len: usize) -> Result<usize> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Slot {
                    // SAFETY: fi_context2 is plain pointers, for which zero is valid.
                    context: Box::new(unsafe { std::mem::zeroed() }),
                    buffer: Vec::new(),
                    mr: ptr::null_mut(),
                });
                self.slots.len() - 1
            }
        };
        if self.slots[slot].buffer.len() < len.max(1)
            && let Err(e) = self.grow(slot, len.max(1))
        {
            self.free.push(slot);
            return Err(e);
        }
        Ok(slot)
    }

    /// Replaces the slot's buffer with a larger one, registered if the provider asks.
    fn grow(&mut self, slot: usize, len: usize) -> Result<()> {
        self.unregister(slot);
        let buffer = vec![0u8; len.next_power_of_two()];
        self.slots[slot].buffer = buffer;
        if self.registers {
            let access = u64::from(sys::FI_SEND | sys::FI_RECV);
            self.registrations += 1;
            let key = self.registrations;
            let s = &mut self.slots[slot];
            // SAFETY: the buffer lives in the slot until it is unregistered (drop or
            // the next growth), which happens before the buffer is freed.
            let code = unsafe {
                sys::fi_mr_reg(
                    self.domain,
                    s.buffer.as_ptr().cast(),
                    s.buffer.len(),
                    access,
                    key,
                    &mut s.mr,
                )
            };
            if code != 0 {
                // An unregistered buffer must not look ready to the next `acquire`: the
                // provider would be handed no descriptor for it.
                s.mr = ptr::null_mut();
                s.buffer = Vec::new();
                return Err(self.error("fi_mr_reg", code.into()));
            }
        }
        Ok(())
    }

    fn unregister(&mut self, slot: usize) {
        let mr = std::mem::replace(&mut self.slots[slot].mr, ptr::null_mut());
        if !mr.is_null() {
            // SAFETY: a registration of ours, closed once; nothing is in flight on it.
            unsafe { sys::fi_close(&mut (*mr).fid) };
        }
    }

    pub(crate) fn release(&mut self, slot: usize) {
        self.free.push(slot);
    }

    pub(crate) fn buffer(&self, slot: usize) -> &[u8] {
        &self.slots[slot].buffer
    }

    pub(crate) fn buffer_mut(&mut self, slot: usize) -> &mut [u8] {
        &mut self.slots[slot].buffer
    }

    fn context(&mut self, slot: usize) -> (*mut c_void, *mut c_void, *mut u8) {
        let s = &mut self.slots[slot];
        let desc = if s.mr.is_null() {
            ptr::null_mut()
        } else {
            // SAFETY: a live registration of ours.
            unsafe { (*s.mr).mem_desc }
        };
        (
            ptr::addr_of_mut!(*s.context).cast(),
            desc,
            s.buffer.as_mut_ptr(),
        )
    }

    /// Sends the first `len` bytes of the slot's buffer to `peer` with `tag`.
    pub(crate) fn send(&mut self, slot: usize, len: usize, peer: usize, tag: u64) -> Code {
        let dest = self
            .addresses
            .get(peer)
            .copied()
            .unwrap_or(sys::FI_ADDR_UNSPEC);
        let (context, desc, buf) = self.context(slot);
        // SAFETY: the slot's buffer holds at least `len` bytes and stays untouched until
        // the completion for `context` is read.
        unsafe { sys::fi_tsend(self.ep, buf.cast(), len, desc, dest, tag, context) }
    }

    /// Sends the bytes of `pieces` as one message to `peer` with `tag`, straight from
    /// the caller's memory (providers that need no local registration only).
    ///
    /// # Safety
    /// The pieces must stay valid and unmodified until the completion for `slot` is read.
    pub(crate) unsafe fn send_vectored(
        &mut self,
        slot: usize,
        pieces: &[sys::iovec],
        peer: usize,
        tag: u64,
    ) -> Code {
        let dest = self
            .addresses
            .get(peer)
            .copied()
            .unwrap_or(sys::FI_ADDR_UNSPEC);
        let (context, _, _) = self.context(slot);
        // SAFETY: the caller keeps the pieces alive and unchanged until completion; the
        // provider copies the iovec array itself before returning.
        unsafe {
            sys::fi_tsendv(
                self.ep,
                pieces.as_ptr(),
                ptr::null_mut(),
                pieces.len(),
                dest,
                tag,
                context,
            )
        }
    }

    /// Receives a message tagged `tag` straight into the caller's memory (providers that
    /// need no local registration only).
    ///
    /// # Safety
    /// The pieces must stay valid, and untouched by anyone else, until the completion for
    /// `slot` is read.
    pub(crate) unsafe fn receive_vectored(
        &mut self,
        slot: usize,
        pieces: &[sys::iovec],
        tag: u64,
    ) -> Code {
        let (context, _, _) = self.context(slot);
        // SAFETY: the caller keeps the pieces alive and to the provider alone until
        // completion; the provider copies the iovec array itself before returning.
        unsafe {
            sys::fi_trecvv(
                self.ep,
                pieces.as_ptr(),
                ptr::null_mut(),
                pieces.len(),
                sys::FI_ADDR_UNSPEC,
                tag,
                0,
                context,
            )
        }
    }

    /// Receives a message whose tag matches `tag` in the bits not set in `ignore`, into
    /// the first `len` bytes of the slot's buffer.
    pub(crate) fn receive(&mut self, slot: usize, len: usize, tag: u64, ignore: u64) -> Code {
        let (context, desc, buf) = self.context(slot);
        // SAFETY: as for `send`; any source, the tag carries the sender's rank.
        unsafe {
            sys::fi_trecv(
                self.ep,
                buf.cast(),
                len,
                desc,
                sys::FI_ADDR_UNSPEC,
                tag,
                ignore,
                context,
            )
        }
    }

    fn slot_of(&self, context: *mut c_void) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| ptr::eq(ptr::addr_of!(*s.context).cast(), context))
    }

    /// Reads finished operations into `done` (and so drives a manual-progress provider).
    pub(crate) fn poll(&mut self, done: &mut Vec<Completion>) -> Result<(), Failed> {
        // SAFETY: fi_cq_tagged_entry is plain data, for which zero is valid.
        let mut entries: [sys::fi_cq_tagged_entry; CQ_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: `cq` is open and `entries` holds CQ_BATCH entries of its format.
        let read = unsafe { sys::fi_cq_read(self.cq, entries.as_mut_ptr().cast(), CQ_BATCH) };
        if read == AGAIN {
            return Ok(());
        }
        if read == -(sys::FI_EAVAIL as isize) {
            return Err(self.read_error());
        }
        let Ok(count) = usize::try_from(read) else {
            return Err(Failed {
                slot: None,
                code: i32::try_from(read).unwrap_or(i32::MIN),
                text: format!("fi_cq_read: {}", self.library.strerror(read as i64)),
            });
        };
        for entry in &entries[..count.min(CQ_BATCH)] {
            if let Some(slot) = self.slot_of(entry.op_context) {
                done.push(Completion {
                    slot,
                    len: entry.len,
                });
            }
        }
        Ok(())
    }

    fn read_error(&mut self) -> Failed {
        // SAFETY: plain data, zero is valid (err_data null: the provider keeps its own).
        let mut entry: sys::fi_cq_err_entry = unsafe { std::mem::zeroed() };
        // SAFETY: `cq` is open; `entry` is a valid error entry.
        let read = unsafe { sys::fi_cq_readerr(self.cq, &mut entry) };
        if read < 0 {
            return Failed {
                slot: None,
                code: i32::try_from(read).unwrap_or(i32::MIN),
                text: format!("fi_cq_readerr: {}", self.library.strerror(read as i64)),
            };
        }
        let mut text = self.library.strerror(entry.err.into());
        let mut detail = [0 as std::ffi::c_char; 256];
        // SAFETY: `cq` is open; the provider writes at most `detail.len()` bytes and
        // returns a C string (its own or `detail`).
        let provider_text = unsafe {
            sys::fi_cq_strerror(
                self.cq,
                entry.prov_errno,
                entry.err_data,
                detail.as_mut_ptr(),
                detail.len(),
            )
        };
        if !provider_text.is_null() {
            // SAFETY: non-null, NUL-terminated, see above.
            let extra = unsafe { std::ffi::CStr::from_ptr(provider_text) }.to_string_lossy();
            if !extra.is_empty() {
                text = format!("{text}; provider says: {extra}");
            }
        }
        Failed {
            slot: self.slot_of(entry.op_context),
            code: entry.err,
            text,
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: each object is closed once, users before what they use: the endpoint
        // (cancelling what is in flight), then registrations, then the rest.
        unsafe {
            if !self.ep.is_null() {
                sys::fi_close(&mut (*self.ep).fid);
            }
            for slot in 0..self.slots.len() {
                self.unregister(slot);
            }
            if !self.av.is_null() {
                sys::fi_close(&mut (*self.av).fid);
            }
            if !self.cq.is_null() {
                sys::fi_close(&mut (*self.cq).fid);
            }
            if !self.domain.is_null() {
                sys::fi_close(&mut (*self.domain).fid);
            }
            if !self.fabric.is_null() {
                sys::fi_close(&mut (*self.fabric).fid);
            }
        }
    }
}
