//! RDMA devices and their ports, as libibverbs sees them: what libfabric does not tell
//! and `hvdrun --check` shows (HCA names, port state, link layer, active MTU).
//!
//! libibverbs is loaded with `dlopen` like libfabric, so the build needs no system
//! library. Only exported functions are called: `ibv_query_port` is the compatibility
//! symbol, whose `ibv_port_attr` prefix is all this module reads.

use std::ffi::{CStr, c_char, c_int, c_void};

use hvd_core::dynlib::Dynlib;
use hvd_core::{Error, Result};

const NAMES: &[&str] = &["libibverbs.so.1", "libibverbs.so"];

/// Ports are numbered from 1; real HCAs have one or two, switches more.
const MAX_PORTS: u8 = 64;

/// One RDMA device (HCA) and its ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The kernel's name for it (`mlx5_0`, `rxe0`, `efa_0`).
    pub name: String,
    pub ports: Vec<Port>,
}

/// One port of a [`Device`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Port number, from 1.
    pub number: u8,
    /// `"active"`, `"down"`, `"init"`, `"armed"`, ...
    pub state: &'static str,
    /// `"InfiniBand"` or `"Ethernet"` (RoCE).
    pub link_layer: &'static str,
    /// Active MTU in bytes.
    pub active_mtu: u32,
}

impl std::fmt::Display for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "port {}: {}, {}, MTU {}",
            self.number, self.state, self.link_layer, self.active_mtu
        )
    }
}

/// The start of libibverbs' `struct ibv_port_attr`, padded well past its full size.
#[repr(C)]
struct PortAttr {
    state: u32,
    max_mtu: u32,
    active_mtu: u32,
    gid_tbl_len: c_int,
    port_cap_flags: u32,
    max_msg_sz: u32,
    bad_pkey_cntr: u32,
    qkey_viol_cntr: u32,
    pkey_tbl_len: u16,
    lid: u16,
    sm_lid: u16,
    lmc: u8,
    max_vl_num: u8,
    sm_sl: u8,
    subnet_timeout: u8,
    init_type_reply: u8,
    active_width: u8,
    active_speed: u8,
    phys_state: u8,
    link_layer: u8,
    reserved: [u8; 128],
}

type GetDeviceList = unsafe extern "C" fn(num: *mut c_int) -> *mut *mut c_void;
type FreeDeviceList = unsafe extern "C" fn(list: *mut *mut c_void);
type GetDeviceName = unsafe extern "C" fn(device: *mut c_void) -> *const c_char;
type OpenDevice = unsafe extern "C" fn(device: *mut c_void) -> *mut c_void;
type CloseDevice = unsafe extern "C" fn(context: *mut c_void) -> c_int;
type QueryPort = unsafe extern "C" fn(context: *mut c_void, port: u8, attr: *mut PortAttr) -> c_int;

struct Verbs {
    get_device_list: GetDeviceList,
    free_device_list: FreeDeviceList,
    get_device_name: GetDeviceName,
    open_device: OpenDevice,
    close_device: CloseDevice,
    query_port: QueryPort,
}

/// Every RDMA device with its ports; an error saying why there are none ("no RDMA
/// devices", no libibverbs, no kernel support).
pub fn devices() -> Result<Vec<Device>> {
    let verbs = load()?;
    let mut count: c_int = 0;
    // SAFETY: ibv_get_device_list writes the count and returns a list we free below.
    let list = unsafe { (verbs.get_device_list)(&mut count) };
    if list.is_null() {
        let reason = std::io::Error::last_os_error();
        return Err(none(format!("ibv_get_device_list failed: {reason}")));
    }
    let found: Vec<*mut c_void> = (0..usize::try_from(count).unwrap_or(0))
        // SAFETY: the list holds `count` device pointers.
        .map(|i| unsafe { *list.add(i) })
        .collect();
    let devices = found.iter().map(|d| describe(&verbs, *d)).collect();
    // SAFETY: the list came from ibv_get_device_list; devices were closed in describe.
    unsafe { (verbs.free_device_list)(list) };
    if found.is_empty() {
        return Err(none("libibverbs found none".into()));
    }
    Ok(devices)
}

fn none(reason: String) -> Error {
    Error::Io {
        context: "no RDMA devices".into(),
        message: reason,
        kind: std::io::ErrorKind::NotFound,
    }
}

fn describe(verbs: &Verbs, device: *mut c_void) -> Device {
    // SAFETY: `device` is an entry of a live device list; the name is a C string it owns.
    let name = unsafe {
        let name = (verbs.get_device_name)(device);
        if name.is_null() {
            String::from("?")
        } else {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        }
    };
    // SAFETY: as above; a null context means the device cannot be opened.
    let context = unsafe { (verbs.open_device)(device) };
    if context.is_null() {
        return Device {
            name,
            ports: Vec::new(),
        };
    }
    let mut ports = Vec::new();
    for number in 1..=MAX_PORTS {
        // SAFETY: PortAttr is plain data for which zero is valid.
        let mut attr: PortAttr = unsafe { std::mem::zeroed() };
        // SAFETY: `context` is open; `attr` is larger than any ibv_port_attr.
        if unsafe { (verbs.query_port)(context, number, &mut attr) } != 0 {
            break;
        }
        ports.push(Port {
            number,
            state: port_state(attr.state),
            link_layer: link_layer(attr.link_layer),
            active_mtu: mtu_bytes(attr.active_mtu),
        });
    }
    // SAFETY: opened above, closed once.
    unsafe { (verbs.close_device)(context) };
    Device { name, ports }
}

fn port_state(state: u32) -> &'static str {
    match state {
        1 => "down",
        2 => "init",
        3 => "armed",
        4 => "active",
        5 => "active (deferred)",
        _ => "unknown",
    }
}

fn link_layer(layer: u8) -> &'static str {
    match layer {
        0 | 1 => "InfiniBand",
        2 => "Ethernet",
        _ => "unknown",
    }
}

/// `enum ibv_mtu` (1: 256 ... 5: 4096) in bytes.
fn mtu_bytes(mtu: u32) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

fn load() -> Result<Verbs> {
    let names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
    match Dynlib::open_first(&names) {
        Ok((library, _)) => resolve(library),
        Err(failures) => Err(Error::LibraryMissing {
            library: "libibverbs".into(),
            hint: format!(
                "install it with `apt-get install libibverbs1` (Debian, Ubuntu) or `yum install \
                 libibverbs` (RHEL, Fedora) to list RDMA devices ({})",
                failures.join("; ")
            ),
        }),
    }
}

fn resolve(library: Dynlib) -> Result<Verbs> {
    let find = |symbol: &CStr| match library.symbol(symbol) {
        Some(address) => Ok(address.as_ptr()),
        None => Err(Error::LibraryMissing {
            library: "libibverbs".into(),
            hint: format!("the loaded library lacks {}", symbol.to_string_lossy()),
        }),
    };
    // SAFETY: each symbol is libibverbs' exported function of that name with the C
    // signature (verbs.h) the target type repeats; the library stays loaded.
    unsafe {
        Ok(Verbs {
            get_device_list: std::mem::transmute::<*mut c_void, GetDeviceList>(find(
                c"ibv_get_device_list",
            )?),
            free_device_list: std::mem::transmute::<*mut c_void, FreeDeviceList>(find(
                c"ibv_free_device_list",
            )?),
            get_device_name: std::mem::transmute::<*mut c_void, GetDeviceName>(find(
                c"ibv_get_device_name",
            )?),
            open_device: std::mem::transmute::<*mut c_void, OpenDevice>(find(c"ibv_open_device")?),
            close_device: std::mem::transmute::<*mut c_void, CloseDevice>(find(
                c"ibv_close_device",
            )?),
            query_port: std::mem::transmute::<*mut c_void, QueryPort>(find(c"ibv_query_port")?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_enums_read_as_words() {
        assert_eq!((mtu_bytes(1), mtu_bytes(5), mtu_bytes(9)), (256, 4096, 0));
        assert_eq!(port_state(4), "active");
        assert_eq!(link_layer(2), "Ethernet");
    }

    #[test]
    fn the_answer_is_a_list_or_a_reason() {
        match devices() {
            Ok(list) => assert!(!list.is_empty()),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.starts_with("no RDMA devices") || text.contains("libibverbs"),
                    "{text}"
                );
            }
        }
    }
}
