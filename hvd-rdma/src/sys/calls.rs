//! The static inline `fi_*` functions of libfabric's headers, in Rust: each calls through
//! the function table of the object it is given, exactly as the C version does. A table
//! entry a provider leaves empty answers `-FI_ENOSYS`.
//!
//! # Safety
//! Every function here takes pointers to live libfabric objects opened through this
//! crate, and buffers that stay valid for as long as the C function requires.

use std::ffi::{c_int, c_void};

use super::bindings::*;

/// `-FI_ENOSYS`, for a table entry a provider does not fill.
const NO_ENTRY: c_int = -(FI_ENOSYS as c_int);

macro_rules! call {
    ($table:expr, $entry:ident, $fail:expr, $($arg:expr),*) => {
        match (*$table).$entry {
            Some(f) => f($($arg),*),
            None => $fail,
        }
    };
}

pub(crate) unsafe fn fi_close(fid: *mut fid) -> c_int {
    // SAFETY: the caller passes a live object; its `ops` table is the provider's.
    unsafe { call!((*fid).ops, close, NO_ENTRY, fid) }
}

pub(crate) unsafe fn fi_domain(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    domain: *mut *mut fid_domain,
) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*fabric).ops,
            domain,
            NO_ENTRY,
            fabric,
            info,
            domain,
            std::ptr::null_mut()
        )
    }
}

pub(crate) unsafe fn fi_endpoint(
    domain: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*domain).ops,
            endpoint,
            NO_ENTRY,
            domain,
            info,
            ep,
            std::ptr::null_mut()
        )
    }
}

pub(crate) unsafe fn fi_cq_open(
    domain: *mut fid_domain,
    attr: *mut fi_cq_attr,
    cq: *mut *mut fid_cq,
) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*domain).ops,
            cq_open,
            NO_ENTRY,
            domain,
            attr,
            cq,
            std::ptr::null_mut()
        )
    }
}

pub(crate) unsafe fn fi_av_open(
    domain: *mut fid_domain,
    attr: *mut fi_av_attr,
    av: *mut *mut fid_av,
) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*domain).ops,
            av_open,
            NO_ENTRY,
            domain,
            attr,
            av,
            std::ptr::null_mut()
        )
    }
}

/// `fi_mr_reg` with no offset or flags. `key` must be unique in the domain unless the
/// provider chooses keys itself (`FI_MR_PROV_KEY`).
pub(crate) unsafe fn fi_mr_reg(
    domain: *mut fid_domain,
    buf: *const c_void,
    len: usize,
    access: u64,
    key: u64,
    mr: *mut *mut fid_mr,
) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        let fid = std::ptr::addr_of_mut!((*domain).fid);
        call!(
            (*domain).mr,
            reg,
            NO_ENTRY,
            fid,
            buf,
            len,
            access,
            0,
            key,
            0,
            mr,
            std::ptr::null_mut()
        )
    }
}

pub(crate) unsafe fn fi_ep_bind(ep: *mut fid_ep, object: *mut fid, flags: u64) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        let fid = std::ptr::addr_of_mut!((*ep).fid);
        call!((*fid).ops, bind, NO_ENTRY, fid, object, flags)
    }
}

pub(crate) unsafe fn fi_enable(ep: *mut fid_ep) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        let fid = std::ptr::addr_of_mut!((*ep).fid);
        call!(
            (*fid).ops,
            control,
            NO_ENTRY,
            fid,
            FI_ENABLE as c_int,
            std::ptr::null_mut()
        )
    }
}

pub(crate) unsafe fn fi_getname(ep: *mut fid_ep, addr: *mut c_void, len: *mut usize) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        let fid = std::ptr::addr_of_mut!((*ep).fid);
        call!((*ep).cm, getname, NO_ENTRY, fid, addr, len)
    }
}

pub(crate) unsafe fn fi_av_insert(
    av: *mut fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut fi_addr_t,
) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*av).ops,
            insert,
            NO_ENTRY,
            av,
            addr,
            count,
            fi_addr,
            0,
            std::ptr::null_mut()
        )
    }
}

pub(crate) unsafe fn fi_tsend(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*ep).tagged,
            send,
            NO_ENTRY as isize,
            ep,
            buf,
            len,
            desc,
            dest,
            tag,
            context
        )
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn fi_trecv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*ep).tagged,
            recv,
            NO_ENTRY as isize,
            ep,
            buf,
            len,
            desc,
            src,
            tag,
            ignore,
            context
        )
    }
}

pub(crate) unsafe fn fi_cq_read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: see the module's safety section.
    unsafe { call!((*cq).ops, read, NO_ENTRY as isize, cq, buf, count) }
}

pub(crate) unsafe fn fi_cq_readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry) -> isize {
    // SAFETY: see the module's safety section.
    unsafe { call!((*cq).ops, readerr, NO_ENTRY as isize, cq, buf, 0) }
}

pub(crate) unsafe fn fi_cq_strerror(
    cq: *mut fid_cq,
    prov_errno: c_int,
    err_data: *const c_void,
    buf: *mut std::ffi::c_char,
    len: usize,
) -> *const std::ffi::c_char {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*cq).ops,
            strerror,
            std::ptr::null(),
            cq,
            prov_errno,
            err_data,
            buf,
            len
        )
    }
}

pub(crate) unsafe fn fi_tsendv(
    ep: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*ep).tagged,
            sendv,
            NO_ENTRY as isize,
            ep,
            iov,
            desc,
            count,
            dest,
            tag,
            context
        )
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn fi_trecvv(
    ep: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: see the module's safety section.
    unsafe {
        call!(
            (*ep).tagged,
            recvv,
            NO_ENTRY as isize,
            ep,
            iov,
            desc,
            count,
            src,
            tag,
            ignore,
            context
        )
    }
}

/// `fi_control(fid, FI_GETWAIT, &fd)`: the file descriptor a wait-object CQ signals.
pub(crate) unsafe fn fi_control(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe { call!((*fid).ops, control, NO_ENTRY, fid, command, arg) }
}

/// `fi_trywait`: 0 when blocking on the objects' wait descriptors is safe now (nothing is
/// pending that only a further read would find), `-FI_EAGAIN` otherwise.
pub(crate) unsafe fn fi_trywait(
    fabric: *mut fid_fabric,
    fids: *mut *mut fid,
    count: c_int,
) -> c_int {
    // SAFETY: see the module's safety section.
    unsafe { call!((*fabric).ops, trywait, NO_ENTRY, fabric, fids, count) }
}
