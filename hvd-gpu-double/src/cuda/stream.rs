//! Streams: a worker thread per stream runs its tasks in order. A task's sequence
//! number is its place in the queue, which is what events and waits refer to.
//!
//! In lazy mode a task runs only once something waits for it: the host (a synchronising
//! call, an event query, a synchronous copy) or another stream's task. Work nothing
//! waits for never runs, so a reader that skips a wait reads what was there before.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use crate::config::settings;

type Work = Box<dyn FnOnce() + Send>;

struct Task {
    /// Tasks of other streams (stream, sequence number) that must have run first.
    after: Vec<(Arc<Stream>, u64)>,
    work: Work,
}

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    /// Tasks ever enqueued: the sequence number of the last one.
    enqueued: u64,
    /// Tasks taken by the worker so far.
    started: u64,
    /// The highest sequence number something waits for (lazy mode runs up to it).
    demanded: u64,
    closed: bool,
}

/// One stream of a device.
pub(crate) struct Stream {
    pub ordinal: u32,
    /// Synchronises with the legacy NULL stream (created without `CU_STREAM_NON_BLOCKING`).
    pub blocking: bool,
    pub is_null: bool,
    queue: Mutex<Queue>,
    work: Condvar,
    /// Tasks run so far.
    done: Mutex<u64>,
    finished: Condvar,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("ordinal", &self.ordinal)
            .field("blocking", &self.blocking)
            .field("is_null", &self.is_null)
            .finish_non_exhaustive()
    }
}

impl Stream {
    /// A new stream of device `ordinal` with its worker running.
    pub(crate) fn start(ordinal: u32, blocking: bool, is_null: bool) -> Arc<Stream> {
        let stream = Arc::new(Stream {
            ordinal,
            blocking,
            is_null,
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            done: Mutex::new(0),
            finished: Condvar::new(),
        });
        let worker = stream.clone();
        std::thread::Builder::new()
            .name("gpu-double-stream".into())
            .spawn(move || worker.run())
            .expect("the system refused a thread for a stream");
        stream
    }

    fn run(&self) {
        let lazy = settings().lazy;
        loop {
            let task = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    let wanted = !lazy || queue.closed || queue.demanded > queue.started;
                    if wanted && let Some(task) = queue.tasks.pop_front() {
                        queue.started += 1;
                        break task;
                    }
                    if queue.closed && queue.tasks.is_empty() {
                        return;
                    }
                    queue = self.work.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
            };
            for (stream, seq) in &task.after {
                stream.wait_for(*seq);
            }
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(task.work)).is_err() {
                eprintln!("hvd-gpu-double: a stream task panicked");
            }
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            *done += 1;
            self.finished.notify_all();
        }
    }

    /// Queues `work` after the tasks in `after` (the context adds what CUDA's legacy NULL
    /// stream requires: [`Context::enqueue`](super::context::Context::enqueue)). Returns
    /// the task's sequence number.
    pub(crate) fn enqueue_after(
        &self,
        after: Vec<(Arc<Stream>, u64)>,
        work: impl FnOnce() + Send + 'static,
    ) -> u64 {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.enqueued += 1;
        queue.tasks.push_back(Task {
            after,
            work: Box::new(work),
        });
        self.work.notify_one();
        queue.enqueued
    }

    pub(crate) fn enqueued(&self) -> u64 {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .enqueued
    }

    pub(crate) fn completed(&self) -> u64 {
        *self.done.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Something waits for the task with sequence number `seq`: in lazy mode, the
    /// tasks up to it may now run.
    pub(crate) fn demand(&self, seq: u64) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if seq > queue.demanded {
            queue.demanded = seq;
            self.work.notify_one();
        }
    }

    /// Waits until the task with sequence number `seq` has run.
    pub(crate) fn wait_for(&self, seq: u64) {
        self.demand(seq);
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while *done < seq {
            done = self.finished.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lets the worker finish what is queued and exit (`cuStreamDestroy` returns at once
    /// and the stream's work still runs).
    pub(crate) fn close(&self) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.closed = true;
        self.work.notify_one();
    }
}
