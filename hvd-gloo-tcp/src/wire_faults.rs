//! A real rank against a fake peer that passes the handshake and then misbehaves on the
//! wire: garbage, a truncated frame, a wrong length, an ABORT.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use hvd_core::{Collective, MemoryStore, ReduceOp, Reduction, Store, TensorMut};

use hvd_core::OpKind;

use crate::frame::{Abort, Header, abort_frame};
use crate::handshake::{self, Identity};
use crate::record::Record;
use crate::{TcpCollective, TcpConfig};

type Result<T> = hvd_core::Result<T>;

/// Rank 0 of 2, connected to a fake rank 1 that the test drives by hand; returns rank 0,
/// the fake's socket and the fake's address as rank 0 sees it.
fn connect_with_fake() -> (TcpCollective, TcpStream, SocketAddr) {
    let store = Arc::new(MemoryStore::new());
    let shared = store.clone();
    let rank0 = thread::spawn(move || TcpCollective::connect(shared, 0, 2, TcpConfig::default()));
    let published = store.get("tcp/addr/0", Duration::from_secs(10)).unwrap();
    let record = Record::decode(&published).unwrap();
    store
        .set(
            "tcp/addr/1",
            &Record {
                port: 1,
                ..record.clone()
            }
            .encode(),
        )
        .unwrap();
    let mut fake = TcpStream::connect(("127.0.0.1", record.port)).unwrap();
    let me = Identity {
        group: "/tcp",
        rank: 1,
        size: 2,
        secret: b"",
    };
    handshake::dial(&mut fake, &me, 0, "rank 0").unwrap();
    let addr = fake.local_addr().unwrap();
    (rank0.join().unwrap().unwrap(), fake, addr)
}

/// Runs a 4 KiB allreduce of "x" on rank 0 while the fake sends `bytes` (and closes if
/// `close`); returns rank 0's error and the error of a second call.
fn allreduce_against(bytes: &[u8], close: bool) -> (String, String, SocketAddr) {
    let (group, mut fake, fake_addr) = connect_with_fake();
    fake.write_all(bytes).unwrap();
    if close {
        drop(fake);
    } else {
        thread::spawn(move || {
            thread::sleep(Duration::from_secs(5));
            drop(fake);
        });
    }
    let run = |name: &str| -> Result<()> {
        let mut x = vec![1.0f32; 1024];
        group.allreduce(
            &mut [TensorMut::from_slice(name, &mut x)],
            Reduction::new(ReduceOp::Sum),
        )
    };
    let first = run("x").unwrap_err().to_string();
    let second = run("y").unwrap_err().to_string();
    (first, second, fake_addr)
}

#[test]
fn garbage_mid_call_is_a_protocol_error_naming_the_peer_op_and_tensor() {
    let (first, second, addr) = allreduce_against(b"this is not an hvd frame, not at all", false);
    assert_eq!(
        first,
        format!(
            "rank 0: protocol error from rank 1 ({addr}): garbage frame header [74, 68, 69, 73, 20, 69, 73, 20, 6e, 6f, 74, 20, 61, 6e, 20, 68, 76, 64, 20, 66, 72, 61, 6d, 65]: bad magic 0x73696874, during allreduce of tensor 'x'"
        )
    );
    assert_eq!(
        second, first,
        "the group stays poisoned with the first error"
    );
}

#[test]
fn a_truncated_frame_names_how_far_it_got() {
    let header = Header::data(OpKind::Allreduce, 1, 0, 4096).encode();
    let (first, _, _) = allreduce_against(&header[..10], true);
    assert_eq!(
        first,
        "rank 0: lost rank 1 during allreduce of tensor 'x': it closed the connection in the middle of a frame (it sent 10 of the 4120 bytes of frame 0)"
    );
}

#[test]
fn a_frame_of_another_length_says_the_ranks_passed_different_sizes() {
    let mut frame = Header::data(OpKind::Allreduce, 1, 0, 2048)
        .encode()
        .to_vec();
    frame.extend_from_slice(&[0u8; 2048]);
    let (first, _, _) = allreduce_against(&frame, false);
    assert_eq!(
        first,
        "rank 0: invalid allreduce of tensor 'x': rank 1 sent a frame of 2048 bytes where this rank expects 4096 (the ranks passed tensors of different sizes or counts)"
    );
}

#[test]
fn a_frame_of_another_call_says_the_ranks_are_out_of_step() {
    let frame = Header::data(OpKind::Barrier, 1, 0, 0).encode();
    let (first, _, addr) = allreduce_against(&frame, false);
    assert_eq!(
        first,
        format!(
            "rank 0: protocol error from rank 1 ({addr}): a frame of call #1 (barrier) where this rank runs call #1 (allreduce): the ranks are not making the same calls in the same order, during allreduce of tensor 'x'"
        )
    );
}

#[test]
fn an_abort_frame_names_the_culprit_and_the_reporter() {
    let abort = Abort {
        culprit: 3,
        reporter: 1,
        cause: "connection reset".into(),
    };
    let (first, _, _) = allreduce_against(&abort_frame(&abort, OpKind::Allreduce, 1), false);
    assert_eq!(
        first,
        "rank 0: lost rank 3 during allreduce of tensor 'x': reported by rank 1: connection reset"
    );
}

#[test]
fn a_peer_that_closes_between_frames_is_lost() {
    let (first, _, _) = allreduce_against(&[], true);
    // Whether the reset that answers this rank's send or the close is seen first varies.
    let causes = [
        "it closed the connection",
        "connection reset (the process died or closed it)",
        "connection broken (the process died or closed it)",
    ];
    assert!(
        causes
            .iter()
            .any(|c| first == format!("rank 0: lost rank 1 during allreduce of tensor 'x': {c}")),
        "{first}"
    );
}
