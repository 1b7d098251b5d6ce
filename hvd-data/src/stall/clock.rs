//! One rank's timing of its steps: the wait for data, the time blocked in collectives,
//! and the wall time of each step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hvd_core::trace::{SpanArgs, Tracer};

/// The Timeline's name for a span of waiting for the next batch.
pub const DATA_WAIT: &str = "DATA_WAIT";
/// The Timeline row `DATA_WAIT` spans sit on, one per rank.
pub const DATA_ROW: &str = "data";

/// What one rank measured of one step, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTimes {
    /// Blocked waiting for the step's batch.
    pub data: f64,
    /// Blocked in collectives (the allreduce of gradients, and any other).
    pub comm: f64,
    /// From the end of the previous step to the end of this one.
    pub wall: f64,
}

/// Times this rank's steps. Wrap the wait for the next batch in [`data`](Self::data),
/// every blocking collective in [`comm`](Self::comm), and call [`step`](Self::step) at
/// the end of each step; a step's wall time runs from the previous `step` (or
/// [`restart`](Self::restart), or creation) to this one.
///
/// With a tracer (the runtime's Timeline recorder, `hvd.tracer()`), each wait for data
/// is also a `DATA_WAIT` span on the rank's `data` row.
pub struct StepClock {
    tracer: Option<Arc<dyn Tracer>>,
    start: Instant,
    current: StepTimes,
    steps: Vec<StepTimes>,
}

impl std::fmt::Debug for StepClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepClock")
            .field("steps", &self.steps.len())
            .field("traced", &self.tracer.is_some())
            .finish()
    }
}

impl Default for StepClock {
    fn default() -> Self {
        StepClock::new()
    }
}

impl StepClock {
    /// A clock whose first step starts now.
    pub fn new() -> Self {
        StepClock {
            tracer: None,
            start: Instant::now(),
            current: StepTimes::default(),
            steps: Vec::new(),
        }
    }

    /// A clock that also records its waits for data as `DATA_WAIT` spans into `tracer`.
    pub fn traced(tracer: Arc<dyn Tracer>) -> Self {
        StepClock {
            tracer: Some(tracer),
            ..StepClock::new()
        }
    }

    /// Starts the next step now, forgetting what was timed since the last step. Call it
    /// right after something every rank leaves together (a broadcast of the weights, the
    /// exchange of the previous epoch's times), so the ranks' first steps start alike.
    pub fn restart(&mut self) {
        self.start = Instant::now();
        self.current = StepTimes::default();
    }

    /// Runs `wait` (fetching the next batch) and counts its time as waiting for data.
    pub fn data<T>(&mut self, wait: impl FnOnce() -> T) -> T {
        let tracer = self.tracer.as_ref().filter(|t| t.enabled());
        if let Some(t) = tracer {
            t.begin(DATA_ROW, DATA_WAIT, SpanArgs::default());
        }
        let begun = Instant::now();
        let value = wait();
        self.current.data += begun.elapsed().as_secs_f64();
        if let Some(t) = &self.tracer {
            // Ends the span even if recording stopped meanwhile; an end without its
            // begin is dropped by the recorder.
            t.end(DATA_ROW, DATA_WAIT);
        }
        value
    }

    /// Runs `collective` and counts its time as blocked in communication.
    pub fn comm<T>(&mut self, collective: impl FnOnce() -> T) -> T {
        let begun = Instant::now();
        let value = collective();
        self.current.comm += begun.elapsed().as_secs_f64();
        value
    }

    /// Counts `wait` as waiting for data, for callers that time it themselves.
    pub fn add_data(&mut self, wait: Duration) {
        self.current.data += wait.as_secs_f64();
    }

    /// Counts `blocked` as time in collectives, for callers that time it themselves.
    pub fn add_comm(&mut self, blocked: Duration) {
        self.current.comm += blocked.as_secs_f64();
    }

    /// Ends the step: its wall time is from the previous step's end to now.
    pub fn step(&mut self) {
        let now = Instant::now();
        let wall = now.duration_since(self.start).as_secs_f64();
        let mut times = std::mem::take(&mut self.current);
        times.wall = wall;
        self.steps.push(times);
        self.start = now;
    }

    /// The steps ended so far.
    pub fn steps(&self) -> &[StepTimes] {
        &self.steps
    }

    /// The steps ended so far, leaving none (at the end of an epoch).
    pub fn take_steps(&mut self) -> Vec<StepTimes> {
        std::mem::take(&mut self.steps)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Spans(Mutex<Vec<String>>);

    impl Tracer for Spans {
        fn enabled(&self) -> bool {
            true
        }
        fn begin(&self, row: &str, activity: &str, _: SpanArgs) {
            self.0.lock().unwrap().push(format!("B {row} {activity}"));
        }
        fn end(&self, row: &str, activity: &str) {
            self.0.lock().unwrap().push(format!("E {row} {activity}"));
        }
        fn instant(&self, _: &str, _: &str) {}
    }

    #[test]
    fn a_step_holds_its_waits_inside_its_wall_time_and_the_waits_are_traced() {
        let spans = Arc::new(Spans::default());
        let mut clock = StepClock::traced(spans.clone());
        for _ in 0..2 {
            let batch = clock.data(|| {
                std::thread::sleep(Duration::from_millis(2));
                7
            });
            assert_eq!(batch, 7);
            clock.comm(|| std::thread::sleep(Duration::from_millis(1)));
            clock.add_data(Duration::from_millis(1));
            clock.step();
        }
        let steps = clock.take_steps();
        assert_eq!(steps.len(), 2);
        for s in &steps {
            assert!(s.data >= 0.003 && s.comm >= 0.001, "{s:?}");
            assert!(s.data - 0.001 + s.comm <= s.wall, "{s:?}");
        }
        assert!(clock.steps().is_empty());
        assert_eq!(
            *spans.0.lock().unwrap(),
            ["B data DATA_WAIT", "E data DATA_WAIT"].repeat(2)
        );
    }
}
