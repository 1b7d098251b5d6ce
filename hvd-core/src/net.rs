//! This host's network interfaces: which address to listen on and publish, and what
//! identifies the host. Shared by the TCP transport (where ranks listen) and the launcher
//! (where its rendezvous server listens).

use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// One address of one network interface that is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub ip: IpAddr,
}

/// Where to listen, and the addresses peers on other hosts should dial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenPlan {
    pub bind: IpAddr,
    pub publish: Vec<IpAddr>,
}

/// Interfaces made by container runtimes and hypervisors: their addresses exist on many
/// hosts at once and are not reachable from other hosts.
fn is_virtual_bridge(name: &str) -> bool {
    ["docker", "br-", "veth", "virbr"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// Addresses that other hosts may be able to reach: not loopback, not link-local (which
/// would need a scope id).
fn is_routable(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified(),
        IpAddr::V6(v6) => !v6.is_loopback() && !v6.is_unicast_link_local() && !v6.is_unspecified(),
    }
}

/// Picks the listening address: the named interface when one is given, otherwise every
/// routable address of a physical-looking interface (IPv4 first), listening on all.
///
/// `explicit` may list several names, `eth0,ib0`: the first this host has is used, so one
/// setting serves hosts whose interfaces are named differently. `source` is where the
/// names came from (`HVD_IFACE`), for the error when this host has none of them.
pub fn listen_plan(
    interfaces: &[Interface],
    explicit: Option<&str>,
    source: &str,
) -> Result<ListenPlan> {
    if let Some(names) = explicit {
        let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
        let name = wanted
            .iter()
            .find(|w| interfaces.iter().any(|i| i.name == **w))
            .copied()
            .unwrap_or(names);
        let mut mine: Vec<IpAddr> = interfaces
            .iter()
            .filter(|i| i.name == name)
            .map(|i| i.ip)
            .filter(|ip| !matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local()))
            .collect();
        mine.sort_by_key(|ip| ip.is_ipv6());
        let Some(bind) = mine.first().copied() else {
            let mut available: Vec<&str> = interfaces.iter().map(|i| i.name.as_str()).collect();
            available.dedup();
            return Err(Error::Config {
                name: source.into(),
                value: names.into(),
                expected: format!(
                    "the name of an interface that is up and has an IP address on this host (here: {})",
                    available.join(", ")
                ),
            });
        };
        return Ok(ListenPlan {
            bind,
            publish: vec![bind],
        });
    }
    let candidates: Vec<IpAddr> = interfaces
        .iter()
        .filter(|i| !is_virtual_bridge(&i.name) && is_routable(&i.ip))
        .map(|i| i.ip)
        .collect();
    let v4: Vec<IpAddr> = candidates
        .iter()
        .filter(|ip| ip.is_ipv4())
        .copied()
        .collect();
    if v4.is_empty() && !candidates.is_empty() {
        return Ok(ListenPlan {
            bind: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            publish: candidates,
        });
    }
    Ok(ListenPlan {
        bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        publish: v4,
    })
}

/// What makes a host distinct: its name and the sorted set of its non-loopback addresses.
/// Network namespaces on one machine share the name but not the addresses, so they count
/// as different hosts, which is what they are to TCP.
pub fn host_identity(hostname: &str, interfaces: &[Interface]) -> String {
    let mut addresses: Vec<IpAddr> = interfaces
        .iter()
        .map(|i| i.ip)
        .filter(|ip| !ip.is_loopback())
        .collect();
    addresses.sort();
    addresses.dedup();
    let addresses: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
    format!("{hostname} [{}]", addresses.join(" "))
}

/// This host's name, or "unknown" when the system will not say.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for writes of its whole length, which is what we pass.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Every IPv4 and IPv6 address of every interface that is up.
pub fn interfaces() -> Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs stores a list it allocated in `head`; we free it below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(Error::io(
            "listing network interfaces",
            &io::Error::last_os_error(),
        ));
    }
    let mut found = Vec::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list from getifaddrs, which is not freed yet.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        if entry.ifa_addr.is_null() || entry.ifa_flags & libc::IFF_UP as libc::c_uint == 0 {
            continue;
        }
        // SAFETY: `ifa_addr` is non-null and its family field says which sockaddr it is.
        let Some(ip) = (unsafe { ip_of(entry.ifa_addr) }) else {
            continue;
        };
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(entry.ifa_name) }
            .to_string_lossy()
            .into_owned();
        found.push(Interface { name, ip });
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once; no reference into the
    // list outlives this point (names were copied into owned strings).
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

/// The IP address in a socket address of family AF_INET or AF_INET6.
///
/// # Safety
/// `addr` must point to a valid socket address whose `sa_family` tells its real type.
unsafe fn ip_of(addr: *const libc::sockaddr) -> Option<IpAddr> {
    // SAFETY: the caller guarantees `addr` is valid; every sockaddr starts with a family.
    let family = i32::from(unsafe { (*addr).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in.
            let v4 = unsafe { &*addr.cast::<libc::sockaddr_in>() };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let v6 = unsafe { &*addr.cast::<libc::sockaddr_in6>() };
            Some(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, ip: &str) -> Interface {
        Interface {
            name: name.into(),
            ip: ip.parse().unwrap(),
        }
    }

    fn sample() -> Vec<Interface> {
        vec![
            iface("lo", "127.0.0.1"),
            iface("lo", "::1"),
            iface("docker0", "172.17.0.1"),
            iface("br-5f2a", "172.18.0.1"),
            iface("veth12ab", "10.9.0.1"),
            iface("virbr0", "192.168.122.1"),
            iface("eth0", "192.0.2.2"),
            iface("eth0", "fd00::2"),
            iface("eth0", "fe80::1"),
        ]
    }

    #[test]
    fn automatic_choice_skips_bridges_loopback_and_link_local() {
        let plan = listen_plan(&sample(), None, "HVD_IFACE").unwrap();
        assert_eq!(plan.bind, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(plan.publish, vec!["192.0.2.2".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn an_ipv6_only_host_listens_on_ipv6() {
        let plan = listen_plan(
            &[iface("lo", "127.0.0.1"), iface("eth0", "fd00::2")],
            None,
            "HVD_IFACE",
        )
        .unwrap();
        assert_eq!(plan.bind, IpAddr::V6(Ipv6Addr::UNSPECIFIED));
        assert_eq!(plan.publish, vec!["fd00::2".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn a_loopback_only_host_publishes_nothing_routable() {
        let plan = listen_plan(&[iface("lo", "127.0.0.1")], None, "HVD_IFACE").unwrap();
        assert!(plan.publish.is_empty());
    }

    #[test]
    fn an_explicit_interface_binds_its_address_even_loopback() {
        let plan = listen_plan(&sample(), Some("lo"), "HVD_IFACE").unwrap();
        assert_eq!(plan.bind, "127.0.0.1".parse::<IpAddr>().unwrap());
        let plan = listen_plan(&sample(), Some("docker0"), "HVD_IFACE").unwrap();
        assert_eq!(plan.publish, vec!["172.17.0.1".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn an_unknown_interface_names_the_variable_and_the_choices() {
        let err = listen_plan(&sample(), Some("eth9,ib0"), "--network-interface").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"eth9,ib0\" for --network-interface: expected the name of an interface that is up and has an IP address on this host (here: lo, docker0, br-5f2a, veth12ab, virbr0, eth0)"
        );
    }

    #[test]
    fn the_first_listed_interface_this_host_has_is_used() {
        let plan = listen_plan(&sample(), Some("ib0, eth0,docker0"), "HVD_IFACE").unwrap();
        assert_eq!(plan.bind, "192.0.2.2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn host_identity_is_the_name_and_sorted_non_loopback_addresses() {
        let mut shuffled = sample();
        shuffled.reverse();
        assert_eq!(
            host_identity("vm", &sample()),
            host_identity("vm", &shuffled)
        );
        assert_eq!(
            host_identity("vm", &[iface("lo", "127.0.0.1"), iface("h0", "10.200.1.1")]),
            "vm [10.200.1.1]"
        );
        assert_ne!(
            host_identity("vm", &[iface("h0", "10.200.1.1")]),
            host_identity("vm", &[iface("h1", "10.200.1.2")])
        );
    }

    #[test]
    fn this_host_has_interfaces_and_a_name() {
        let found = interfaces().unwrap();
        assert!(found.iter().any(|i| i.ip.is_loopback()), "{found:?}");
        assert!(!hostname().is_empty());
    }
}
