//! Sockets with the options every hvd connection gets.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use socket2::{Domain, SockAddr, Socket, TcpKeepalive, Type};

/// Keepalive finds a dead host on an idle connection within about a minute; the call
/// timeout covers connections in use.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_PROBES: u32 = 5;

fn domain(ip: IpAddr) -> Domain {
    if ip.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// Options every connection gets. Buffer sizes are left to the kernel: its autotuning
/// grows them as far as `net.ipv4.tcp_wmem` and `tcp_rmem` allow (4 MiB and 32 MiB on the
/// test machine), while a fixed size turns autotuning off; a fixed 4 MiB measured 5-15 %
/// slower at 4 ranks on 2 cores and caps the window on links that need more.
fn tune(socket: &Socket) -> io::Result<()> {
    socket.set_tcp_nodelay(true)?;
    let keepalive = TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    socket.set_tcp_keepalive(&keepalive)
}

/// A listener on `ip`, on a port the system picks.
pub(crate) fn listen(ip: IpAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(domain(ip), Type::STREAM, None)?;
    if ip.is_ipv6() && ip.is_unspecified() {
        // Dual stack, so IPv4 peers reach an IPv6 wildcard listener too.
        socket.set_only_v6(false)?;
    }
    tune(&socket)?;
    socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// A tuned connection to `addr`.
pub(crate) fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let socket = Socket::new(domain(addr.ip()), Type::STREAM, None)?;
    tune(&socket)?;
    socket.connect_timeout(&SockAddr::from(addr), timeout)?;
    Ok(socket.into())
}

/// Options an accepted connection does not inherit from its listener.
pub(crate) fn tune_accepted(stream: &TcpStream) -> io::Result<()> {
    tune(&socket2::SockRef::from(stream))
}
