//! The double's behaviour through its own entry points, as a C caller sees it: what hvd's
//! tests rely on it to catch. Settings that are read once per process (lazy mode) are
//! tested in a child process of this test binary.

use std::ffi::{CStr, c_void};
use std::process::Command;

use crate::cuda::api::*;
use crate::nccl::api::*;

const CHILD: &str = "HVD_GPU_DOUBLE_TEST_CHILD";

fn ok(code: i32, what: &str) {
    assert_eq!(code, 0, "{what} returned {code}");
}

/// Initialises the driver and makes device 0's context current on this thread.
fn use_device() {
    ok(cuInit(0), "cuInit");
    let mut ctx = 0usize;
    // SAFETY: `ctx` is a valid output.
    ok(unsafe { cuDevicePrimaryCtxRetain(&mut ctx, 0) }, "retain");
    ok(cuCtxSetCurrent(ctx), "set current");
}

fn alloc(bytes: usize) -> u64 {
    let mut ptr = 0u64;
    // SAFETY: `ptr` is a valid output.
    ok(unsafe { cuMemAlloc_v2(&mut ptr, bytes) }, "cuMemAlloc");
    ptr
}

fn upload(ptr: u64, data: &[u8]) {
    // SAFETY: `data` is readable for its length.
    ok(
        unsafe { cuMemcpyHtoD_v2(ptr, data.as_ptr().cast(), data.len()) },
        "HtoD",
    );
}

fn download(ptr: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is writable for its length and the copy completes before return.
    ok(
        unsafe { cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), ptr, len) },
        "DtoH",
    );
    out
}

fn stream(flags: u32) -> usize {
    let mut handle = 0usize;
    // SAFETY: `handle` is a valid output.
    ok(
        unsafe { cuStreamCreate(&mut handle, flags) },
        "cuStreamCreate",
    );
    handle
}

/// Runs this test again in a child process with `env`, and returns whether it passed.
fn in_child(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn calls_without_a_current_context_fail_as_cuda_does() {
    ok(cuInit(0), "cuInit");
    let mut ptr = 0u64;
    // SAFETY: `ptr` is a valid output.
    let code = std::thread::spawn(move || unsafe { cuMemAlloc_v2(&mut ptr, 16) })
        .join()
        .unwrap();
    assert_eq!(code, crate::cuda::INVALID_CONTEXT);
    use_device();
    let ptr = alloc(100);
    let (mut kind, mut ordinal, mut start, mut size) = (0u32, -1i32, 0u64, 0usize);
    // SAFETY: each output has the attribute's C type.
    unsafe {
        ok(
            cuPointerGetAttribute((&mut kind as *mut u32).cast(), 2, ptr + 10),
            "type",
        );
        ok(
            cuPointerGetAttribute((&mut ordinal as *mut i32).cast(), 9, ptr),
            "ordinal",
        );
        ok(
            cuPointerGetAttribute((&mut start as *mut u64).cast(), 11, ptr + 99),
            "start",
        );
        ok(
            cuPointerGetAttribute((&mut size as *mut usize).cast(), 12, ptr),
            "size",
        );
    }
    assert_eq!((kind, ordinal, start, size), (2, 0, ptr, 256));
    let host = [0u8; 4];
    // SAFETY: as above.
    let code =
        unsafe { cuPointerGetAttribute((&mut kind as *mut u32).cast(), 2, host.as_ptr() as u64) };
    assert_eq!(
        code,
        crate::cuda::INVALID_VALUE,
        "host memory is not device memory"
    );
    assert_eq!(download(ptr, 4), [0xCD; 4], "fresh memory is not zeroed");
    ok(cuMemFree_v2(ptr), "free");
    assert_eq!(cuMemFree_v2(ptr), crate::cuda::INVALID_VALUE, "double free");
}

#[test]
fn the_host_crashes_on_a_device_pointer() {
    if std::env::var_os(CHILD).is_some() {
        use_device();
        let ptr = alloc(64);
        // SAFETY: deliberately not: this process must die of it, as on a GPU.
        let byte = unsafe { std::ptr::read_volatile(ptr as *const u8) };
        println!("read {byte} from device memory");
        return;
    }
    let out = in_child("tests::the_host_crashes_on_a_device_pointer", &[]);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out:?}");
}

#[test]
fn lazy_streams_show_a_missing_wait_as_stale_data() {
    if std::env::var_os(CHILD).is_some() {
        use_device();
        let (writer, reader) = (stream(1), stream(1));
        let ptr = alloc(8);
        upload(ptr, &[0; 8]);
        let data = [7u8; 8];
        // SAFETY: `data` is readable (copied at once, as pageable memory is).
        ok(
            unsafe { cuMemcpyHtoDAsync_v2(ptr, data.as_ptr().cast(), 8, writer) },
            "upload",
        );
        let mut seen = [1u8; 8];
        // SAFETY: `seen` outlives the copy: the stream is synchronised below.
        ok(
            unsafe { cuMemcpyDtoHAsync_v2(seen.as_mut_ptr().cast(), ptr, 8, reader) },
            "read",
        );
        ok(cuStreamSynchronize(reader), "sync reader");
        assert_eq!(
            seen, [0; 8],
            "the reader did not wait, so it saw the old bytes"
        );
        let mut event = 0usize;
        // SAFETY: `event` is a valid output.
        ok(unsafe { cuEventCreate(&mut event, 2) }, "event");
        ok(cuEventRecord(event, writer), "record");
        ok(cuStreamWaitEvent(reader, event, 0), "wait");
        // SAFETY: as above.
        ok(
            unsafe { cuMemcpyDtoHAsync_v2(seen.as_mut_ptr().cast(), ptr, 8, reader) },
            "read",
        );
        ok(cuStreamSynchronize(reader), "sync reader");
        assert_eq!(
            seen, [7; 8],
            "after waiting for the event it sees the new bytes"
        );
        assert_eq!(cuEventQuery(event), crate::cuda::SUCCESS);
        return;
    }
    let out = in_child(
        "tests::lazy_streams_show_a_missing_wait_as_stale_data",
        &[(crate::LAZY_VAR, "1")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// One rank of a communicator, as a thread.
struct Rank {
    comm: usize,
    stream: usize,
}

fn wait_ready(comm: usize) -> i32 {
    loop {
        let mut state = 0;
        // SAFETY: `state` is a valid output.
        ok(
            unsafe { ncclCommGetAsyncError(comm, &mut state) },
            "async error",
        );
        if state != crate::nccl::IN_PROGRESS {
            return state;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn last_error(comm: usize) -> String {
    // SAFETY: the double returns a NUL-terminated string.
    unsafe { CStr::from_ptr(ncclGetLastError(comm)) }
        .to_string_lossy()
        .into_owned()
}

/// Runs `body` on `size` ranks (threads), each with a non-blocking communicator of the
/// same unique id and a stream of its own.
fn ranks<T: Send>(size: usize, body: impl Fn(usize, &Rank) -> T + Sync) -> Vec<T> {
    let mut id = std::mem::MaybeUninit::<UniqueId>::uninit();
    // SAFETY: the double fills the id.
    ok(unsafe { ncclGetUniqueId(id.as_mut_ptr()) }, "unique id");
    // SAFETY: filled above.
    let id = unsafe { id.assume_init() };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let body = &body;
                s.spawn(move || {
                    use_device();
                    let config = Config::non_blocking();
                    let mut comm = 0usize;
                    // SAFETY: `comm` is a valid output and `config` a whole config.
                    let code = unsafe {
                        ncclCommInitRankConfig(&mut comm, size as i32, id, rank as i32, &config)
                    };
                    assert_eq!(code, crate::nccl::IN_PROGRESS, "a non-blocking init");
                    assert_eq!(wait_ready(comm), 0, "{}", last_error(comm));
                    let rank_of = Rank {
                        comm,
                        stream: stream(1),
                    };
                    body(rank, &rank_of)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn floats(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn read_floats(ptr: u64, n: usize) -> Vec<f32> {
    download(ptr, n * 4)
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Waits until the rank's calls are enqueued (a non-blocking communicator), then for its
/// stream; returns the communicator's state.
fn finish(rank: &Rank) -> i32 {
    if wait_ready(rank.comm) != 0 {
        return wait_ready(rank.comm);
    }
    ok(cuStreamSynchronize(rank.stream), "sync");
    wait_ready(rank.comm)
}

#[test]
fn ranks_reduce_gather_and_exchange_through_the_segment() {
    let results = ranks(3, |rank, r| {
        let buf = alloc(4 * 4);
        upload(buf, &floats(&[rank as f32 + 1.0; 4]));
        let (comm, stream) = (r.comm, r.stream);
        assert_eq!(
            ncclAllReduce(buf, buf, 4, 7, 0, comm, stream),
            crate::nccl::IN_PROGRESS
        );
        assert_eq!(finish(r), 0, "{}", last_error(comm));
        let sum = read_floats(buf, 4);
        // Pre-multiplied by rank-local scalars: 0.5 * (1 + 2 + 3).
        let mut op = 0;
        let half = 0.5f32;
        // SAFETY: `op` is a valid output and the scalar a float.
        ok(
            unsafe {
                ncclRedOpCreatePreMulSum(
                    &mut op,
                    (&half as *const f32).cast::<c_void>(),
                    7,
                    1,
                    comm,
                )
            },
            "premul",
        );
        upload(buf, &floats(&[rank as f32 + 1.0; 4]));
        ncclAllReduce(buf, buf, 4, 7, op, comm, stream);
        assert_eq!(finish(r), 0);
        let premul = read_floats(buf, 4);
        // Every rank's 2 elements, gathered; then send to the next rank, receive from the
        // previous one in one group.
        let gathered = alloc(6 * 4);
        ncclAllGather(buf, gathered, 2, 7, comm, stream);
        assert_eq!(finish(r), 0);
        let all = read_floats(gathered, 6);
        let into = alloc(4);
        upload(buf, &floats(&[rank as f32 * 10.0]));
        ncclGroupStart();
        ncclSend(buf, 1, 7, ((rank + 1) % 3) as i32, comm, stream);
        ncclRecv(into, 1, 7, ((rank + 2) % 3) as i32, comm, stream);
        assert_eq!(ncclGroupEnd(), crate::nccl::IN_PROGRESS);
        assert_eq!(finish(r), 0, "{}", last_error(comm));
        (sum, premul, all, read_floats(into, 1))
    });
    for (rank, (sum, premul, all, received)) in results.into_iter().enumerate() {
        assert_eq!(sum, [6.0; 4]);
        assert_eq!(premul, [3.0; 4]);
        assert_eq!(all, [3.0; 6]);
        assert_eq!(received, [((rank + 2) % 3) as f32 * 10.0]);
    }
}

#[test]
fn mismatched_calls_fail_on_every_rank_naming_both() {
    let results = ranks(2, |rank, r| {
        let count = if rank == 0 { 5 } else { 7 };
        let buf = alloc(7 * 4);
        ncclAllReduce(buf, buf, count, 7, 0, r.comm, r.stream);
        let code = finish(r);
        (code, last_error(r.comm))
    });
    for (code, message) in results {
        assert_eq!(code, crate::nccl::INVALID_USAGE);
        assert_eq!(
            message,
            "ranks disagree on call 1: rank 0 called ncclAllReduce(count 5, float32, sum), \
             rank 1 called ncclAllReduce(count 7, float32, sum)"
        );
    }
}

#[test]
fn a_rank_that_aborts_ends_its_peers_waits_with_a_remote_error() {
    let results = ranks(2, |rank, r| {
        let buf = alloc(4);
        if rank == 1 {
            ok(ncclCommAbort(r.comm), "abort");
            return (0, String::new());
        }
        ncclAllReduce(buf, buf, 1, 7, 0, r.comm, r.stream);
        let code = finish(r);
        (code, last_error(r.comm))
    });
    assert_eq!(results[0].0, crate::nccl::REMOTE_ERROR);
    assert_eq!(
        results[0].1,
        "rank 1 left the communicator (aborted or destroyed it) during call 1"
    );
}

#[test]
fn a_non_blocking_split_hands_back_its_communicator_only_once_the_parent_is_ready() {
    let results = ranks(2, |rank, r| {
        // Rank 0 alone in one sub-group, rank 1 in none.
        let color = if rank == 0 { 5 } else { -1 };
        let slot = Box::new(usize::MAX);
        let slot = Box::into_raw(slot);
        // SAFETY: `slot` stays valid until the parent is ready (freed below).
        let code = unsafe { ncclCommSplit(r.comm, color, 0, slot, std::ptr::null()) };
        assert_eq!(code, crate::nccl::IN_PROGRESS, "a non-blocking split");
        // SAFETY: the double wrote the slot before returning.
        let at_return = unsafe { slot.read_volatile() };
        let state = wait_ready(r.comm);
        // SAFETY: NCCL's thread is done with the slot once the parent is ready.
        let after = unsafe { *Box::from_raw(slot) };
        (at_return, state, after)
    });
    let (at_return, state, child) = results[0];
    assert_eq!((at_return, state), (0, 0), "null until the split ends");
    assert_ne!(
        child, 0,
        "rank 0's new communicator, once the parent is ready"
    );
    assert_eq!(wait_ready(child), 0, "{}", last_error(child));
    let mut count = 0;
    // SAFETY: `count` is a valid output.
    ok(unsafe { ncclCommCount(child, &mut count) }, "count");
    assert_eq!(count, 1);
    assert_eq!(
        results[1],
        (0, 0, 0),
        "no communicator for NCCL_SPLIT_NOCOLOR"
    );
}
