use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd_core::Store;

use super::wire::{
    Direction, MAGIC, MAX_BODY, NONCE_BYTES, Request, Response, read_frame, write_frame,
};
use super::{StoreServer, TcpStore};

const SECRET: &[u8] = b"job secret";

fn server() -> StoreServer {
    StoreServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), SECRET).unwrap()
}

fn client(server: &StoreServer, secret: &[u8]) -> hvd_core::Result<TcpStore> {
    TcpStore::connect(&server.addr().to_string(), secret, Duration::from_secs(5))
}

/// Waits for the server to count `n` refusals, which it does just after answering.
fn refusals_reach(server: &StoreServer, n: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.refused() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.refused() == n
}

#[test]
fn every_store_operation_works_across_the_wire() {
    let server = server();
    let store = client(&server, SECRET).unwrap();
    store.set("a", b"1").unwrap();
    assert_eq!(store.get("a", Duration::from_secs(1)).unwrap(), b"1");
    assert_eq!(store.try_get("a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.try_get("b").unwrap(), None);
    assert_eq!(store.add("n", 5).unwrap(), 5);
    assert_eq!(store.add("n", -2).unwrap(), 3);
    assert!(store.delete("a").unwrap());
    assert!(!store.delete("a").unwrap());
    // The launcher's side sees what ranks wrote.
    assert_eq!(server.store().try_get("n").unwrap(), Some(b"3".to_vec()));
    assert_eq!(server.refused(), 0);
}

#[test]
fn a_get_waits_for_another_client_and_times_out_naming_the_key() {
    let server = server();
    let waiter = Arc::new(client(&server, SECRET).unwrap());
    let setter = client(&server, SECRET).unwrap();
    let wait = {
        let waiter = waiter.clone();
        std::thread::spawn(move || waiter.get("late", Duration::from_secs(10)))
    };
    std::thread::sleep(Duration::from_millis(50));
    setter.set("late", b"here").unwrap();
    assert_eq!(wait.join().unwrap().unwrap(), b"here");
    let err = waiter.get("never", Duration::from_millis(50)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "store: timed out after 50ms waiting for key 'never': no rank has set it"
    );
}

#[test]
fn a_client_with_the_wrong_secret_is_refused_and_others_carry_on() {
    let server = server();
    let good = client(&server, SECRET).unwrap();
    // Refused on connecting, before it could ask anything.
    let err = client(&server, b"another job").unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "store: rendezvous server {} refused this rank's request: authentication failed: the sender does not hold the job secret (HVD_SECRET differs from the job's)",
            server.addr()
        )
    );
    assert!(refusals_reach(&server, 1));
    assert_eq!(server.store().try_get("k").unwrap(), None);
    good.set("k", b"v").unwrap();
    assert_eq!(good.try_get("k").unwrap(), Some(b"v".to_vec()));
}

/// Connects by hand and reads the greeting's nonce.
fn raw_connection(server: &StoreServer) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    let mut greeting = [0u8; MAGIC.len() + NONCE_BYTES];
    stream.read_exact(&mut greeting).unwrap();
    assert_eq!(&greeting[..MAGIC.len()], MAGIC);
    (stream, greeting[MAGIC.len()..].to_vec())
}

fn refusal(stream: &mut TcpStream) -> String {
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    assert_eq!(&reply[..4], &u32::MAX.to_le_bytes(), "a refusal frame");
    String::from_utf8(reply[8..].to_vec()).unwrap()
}

#[test]
fn a_replayed_request_is_refused() {
    let server = server();
    let (mut stream, nonce) = raw_connection(&server);
    let set = Request::Set {
        key: "k".into(),
        value: b"v".to_vec(),
    };
    let frame = |seq| {
        let mut bytes = Vec::new();
        write_frame(
            &mut bytes,
            SECRET,
            Direction::Request,
            &nonce,
            &set.encode(seq),
        )
        .unwrap();
        bytes
    };
    stream.write_all(&frame(0)).unwrap();
    stream.write_all(&frame(0)).unwrap();
    let mut answer = vec![0u8; 4 + 8 + 1 + 32];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(
        refusal(&mut stream),
        "request number 0 where 1 was due (a replay?)"
    );
    assert!(refusals_reach(&server, 1));
}

#[test]
fn a_signed_but_malformed_request_is_refused_naming_the_field() {
    let server = server();
    let (mut stream, nonce) = raw_connection(&server);
    let mut frame = Vec::new();
    write_frame(&mut frame, SECRET, Direction::Request, &nonce, &[0, 0, 0]).unwrap();
    stream.write_all(&frame).unwrap();
    assert_eq!(
        refusal(&mut stream),
        "malformed request: truncated: expected 8 bytes for the sequence number, 3 left"
    );
    assert!(refusals_reach(&server, 1));
}

#[test]
fn a_value_larger_than_a_frame_is_refused_before_sending() {
    let server = server();
    let store = client(&server, SECRET).unwrap();
    let err = store.set("big", &vec![0; MAX_BODY + 1]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "store: the value of key 'big' is 16777217 bytes, more than the 16777216 a rendezvous store holds"
    );
    store.set("small", b"fits").unwrap();
    assert_eq!(server.refused(), 0);
}

#[test]
fn garbage_and_silence_are_refused_without_harm() {
    let server = server();
    let (mut stream, _) = raw_connection(&server);
    stream.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(
        refusal(&mut stream),
        "a frame of 542393671 bytes (at most 1024 expected): not the hvd rendezvous protocol"
    );
    assert!(refusals_reach(&server, 1));
    let good = client(&server, SECRET).unwrap();
    good.set("still", b"works").unwrap();
    assert_eq!(good.try_get("still").unwrap(), Some(b"works".to_vec()));
}

#[test]
fn something_that_is_not_a_rendezvous_server_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let talker = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n").unwrap();
    });
    let err = TcpStore::connect(&addr.to_string(), SECRET, Duration::from_secs(5)).unwrap_err();
    talker.join().unwrap();
    assert_eq!(
        err.to_string(),
        format!("store: {addr} is not an hvd rendezvous server (or speaks another version)")
    );
}

#[test]
fn nothing_listening_is_an_error_naming_the_address_after_the_timeout() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let started = Instant::now();
    let err = TcpStore::connect(&addr.to_string(), SECRET, Duration::from_millis(300)).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "store: cannot reach the rendezvous server at {addr} within 0.3s: "
        )) && text.ends_with("(is the launcher, or rank 0, running and reachable from this host?)"),
        "{text}"
    );
}

/// A server that greets, answers the hello, then reads requests and never answers,
/// holding the connection open: a rendezvous server that went silent.
fn silent_server() -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let serve = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let nonce = [7u8; NONCE_BYTES];
        stream.write_all(MAGIC).unwrap();
        stream.write_all(&nonce).unwrap();
        let hello = read_frame(&mut stream, SECRET, Direction::Request, &nonce, MAX_BODY);
        assert!(hello.is_ok());
        let done = Response::Done.encode(0);
        write_frame(&mut stream, SECRET, Direction::Response, &nonce, &done).unwrap();
        // Read whatever comes until the client gives up and closes.
        let mut sink = [0u8; 1024];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
    });
    (addr, serve)
}

#[test]
fn a_get_without_a_deadline_still_fails_when_the_server_goes_silent() {
    let (addr, serve) = silent_server();
    let store = TcpStore::connect(&addr.to_string(), SECRET, Duration::from_secs(10))
        .unwrap()
        .with_limits(Duration::from_millis(100), Duration::from_millis(200));
    // Duration::MAX is "wait for the key as long as it takes", not "for a dead server".
    let err = store.get("never", Duration::MAX).unwrap_err().to_string();
    assert!(
        err.contains(&format!("rendezvous server {addr}: waiting for an answer")),
        "{err}"
    );
    drop(store);
    serve.join().unwrap();
}

#[test]
fn a_large_request_to_a_server_that_stopped_reading_fails_in_time() {
    // Greets and answers the hello, then takes no more bytes until told to go: a server
    // stopped by SIGSTOP or swapped out.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let serve = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let nonce = [7u8; NONCE_BYTES];
        stream.write_all(MAGIC).unwrap();
        stream.write_all(&nonce).unwrap();
        read_frame(&mut stream, SECRET, Direction::Request, &nonce, MAX_BODY).unwrap();
        let hello = Response::Done.encode(0);
        write_frame(&mut stream, SECRET, Direction::Response, &nonce, &hello).unwrap();
        let _ = finished.recv_timeout(Duration::from_secs(30));
    });
    let store = TcpStore::connect(&addr.to_string(), SECRET, Duration::from_secs(10))
        .unwrap()
        .with_limits(Duration::from_millis(100), Duration::from_millis(200));
    let started = std::time::Instant::now();
    let err = store
        .set("weights", &vec![0u8; MAX_BODY - 1024])
        .unwrap_err()
        .to_string();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        err.starts_with(&format!(
            "store: rendezvous server {addr}: sending a request: "
        )),
        "{err}"
    );
    done.send(()).unwrap();
    serve.join().unwrap();
}

#[test]
fn a_long_get_is_asked_in_parts_and_still_sees_the_key_set_late() {
    let server = server();
    let waiter = Arc::new(
        client(&server, SECRET)
            .unwrap()
            .with_limits(Duration::from_millis(20), Duration::from_secs(30)),
    );
    let wait = {
        let waiter = waiter.clone();
        std::thread::spawn(move || waiter.get("late", Duration::MAX))
    };
    // Several of the waiter's requests run out before the key is set.
    std::thread::sleep(Duration::from_millis(200));
    client(&server, SECRET)
        .unwrap()
        .set("late", b"here")
        .unwrap();
    assert_eq!(wait.join().unwrap().unwrap(), b"here");
    // A bounded wait made of several requests ends with the caller's timeout.
    let err = waiter.get("never", Duration::from_millis(70)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "store: timed out after 70ms waiting for key 'never': no rank has set it"
    );
}
