//! What one connection is doing, and so how long it may stay silent before it is closed.
//!
//! The clocks: a request head must arrive within the header timeout, counted from the accept
//! (the first request) or from its first byte (each next request on a kept-alive connection);
//! between requests the idle timeout runs; while a request is answered there is no clock.
//! Besides, whatever the phase, a client that stops taking what is sent has the idle timeout
//! (a stall outlives request boundaries: hyper may start the next pipelined request while the
//! last response still waits to be flushed).

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::ConnectionLimits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A request head is on its way: since the accept, or since the first byte after a
    /// response.
    ReadingHead { since: Instant },
    /// Kept alive after a response, with nothing of the next request received yet.
    Idle { since: Instant },
    /// Requests are being answered.
    Answering { in_flight: u32 },
}

#[derive(Debug, Clone, Copy)]
struct State {
    phase: Phase,
    /// Since when the client has taken none of what is sent (a write found its window full).
    stalled_since: Option<Instant>,
}

/// A connection's phase, updated by its I/O and its requests, read by its watchdog.
#[derive(Debug)]
pub(super) struct Activity {
    state: Mutex<State>,
    /// Woken when the deadline may have come closer (the watchdog sleeps until it).
    nearer: Notify,
}

impl Activity {
    /// A connection just accepted: its first request head is on the header clock.
    pub(super) fn accepted() -> Self {
        Activity {
            state: Mutex::new(State {
                phase: Phase::ReadingHead {
                    since: Instant::now(),
                },
                stalled_since: None,
            }),
            nearer: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived from the client.
    pub(super) fn received(&self) {
        let mut state = self.state();
        if let Phase::Idle { .. } = state.phase {
            state.phase = Phase::ReadingHead {
                since: Instant::now(),
            };
            self.nearer.notify_one();
        }
    }

    /// A request head was read and the request handed to the router.
    pub(super) fn request_started(&self) {
        let mut state = self.state();
        let in_flight = match state.phase {
            Phase::Answering { in_flight } => in_flight.saturating_add(1),
            Phase::ReadingHead { .. } | Phase::Idle { .. } => 1,
        };
        state.phase = Phase::Answering { in_flight };
    }

    /// A response was sent in full (or abandoned).
    pub(super) fn request_finished(&self) {
        let mut state = self.state();
        if let Phase::Answering { in_flight } = state.phase {
            state.phase = if in_flight > 1 {
                Phase::Answering {
                    in_flight: in_flight - 1,
                }
            } else {
                Phase::Idle {
                    since: Instant::now(),
                }
            };
            self.nearer.notify_one();
        }
    }

    /// A write found the client's window full.
    pub(super) fn send_blocked(&self) {
        let mut state = self.state();
        if state.stalled_since.is_none() {
            state.stalled_since = Some(Instant::now());
            self.nearer.notify_one();
        }
    }

    /// A write went through: the client is taking what is sent.
    pub(super) fn send_progressed(&self) {
        self.state().stalled_since = None;
    }

    /// When the connection is to be closed if nothing changes; `None`: not while it answers
    /// a client that takes the answer.
    pub(super) fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        let state = *self.state();
        let phase = match state.phase {
            Phase::ReadingHead { since } => Some(since + limits.header_timeout),
            Phase::Idle { since } => Some(since + limits.idle_timeout),
            Phase::Answering { .. } => None,
        };
        let stall = state.stalled_since.map(|since| since + limits.idle_timeout);
        match (phase, stall) {
            (Some(phase), Some(stall)) => Some(phase.min(stall)),
            (phase, stall) => phase.or(stall),
        }
    }

    /// Whether the connection has stayed silent past its deadline.
    pub(super) fn expired(&self, limits: &ConnectionLimits) -> bool {
        self.deadline(limits)
            .is_some_and(|deadline| deadline <= Instant::now())
    }

    /// Resolves when the deadline may have come closer than the one last read.
    pub(super) async fn moved(&self) {
        self.nearer.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4,
        }
    }

    fn seconds_left(activity: &Activity) -> Option<u64> {
        let deadline = activity.deadline(&limits())?;
        Some((deadline - Instant::now()).as_secs_f64().round() as u64)
    }

    #[test]
    fn each_phase_runs_its_own_clock() {
        let activity = Activity::accepted();
        assert_eq!(seconds_left(&activity), Some(10), "the first head");
        activity.request_started();
        assert_eq!(seconds_left(&activity), None, "answering");
        activity.send_blocked();
        assert_eq!(seconds_left(&activity), Some(60), "a client not reading");
        activity.send_progressed();
        assert_eq!(seconds_left(&activity), None, "reading again");
        activity.request_finished();
        assert_eq!(seconds_left(&activity), Some(60), "kept alive");
        activity.received();
        assert_eq!(seconds_left(&activity), Some(10), "the next head");
        activity.received();
        activity.request_started();
        activity.request_started();
        activity.request_finished();
        assert_eq!(seconds_left(&activity), None, "one still in flight");
        activity.request_finished();
        assert_eq!(seconds_left(&activity), Some(60));
    }

    #[test]
    fn a_stall_outlives_the_request_it_began_in() {
        let activity = Activity::accepted();
        activity.request_started();
        activity.send_blocked();
        activity.request_finished();
        activity.received();
        activity.request_started();
        assert_eq!(
            seconds_left(&activity),
            Some(60),
            "the next request, still stalled"
        );
        activity.send_progressed();
        assert_eq!(seconds_left(&activity), None);
    }

    #[test]
    fn bytes_during_a_head_do_not_restart_its_clock() {
        let activity = Activity::accepted();
        let first = activity.deadline(&limits());
        std::thread::sleep(Duration::from_millis(5));
        activity.received();
        assert_eq!(activity.deadline(&limits()), first);
    }
}
