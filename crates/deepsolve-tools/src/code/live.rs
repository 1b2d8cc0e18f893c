//! Code's output as it prints, for a call's progress: whole lines, at most one report per
//! [`EVERY`], each at most [`MAX_REPORT_CHARS`] (its last ones kept). The result still carries
//! the whole capped output; this is what a front end shows while the code runs.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use deepsolve_core::Progress;

/// The shortest time between two reports.
const EVERY: Duration = Duration::from_millis(100);
/// The longest report, in characters; a longer one keeps its end.
const MAX_REPORT_CHARS: usize = 2_000;
/// Output kept waiting for a line's end, in bytes; past it the partial line is reported.
const MAX_PENDING_BYTES: usize = 64 * 1024;

/// Collects output and reports it through `progress`.
pub(crate) struct LiveOutput {
    progress: Progress,
    state: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    last: Option<Instant>,
}

impl LiveOutput {
    pub(crate) fn new(progress: Progress) -> LiveOutput {
        LiveOutput {
            progress,
            state: Mutex::default(),
        }
    }

    /// Bytes the code wrote: its whole lines are reported when the last report is old enough.
    pub(crate) fn push(&self, bytes: &[u8]) {
        if !self.progress.is_listened() {
            return;
        }
        let mut pending = self.state.lock().unwrap_or_else(|e| e.into_inner());
        pending.bytes.extend_from_slice(bytes);
        let due = pending.last.is_none_or(|last| last.elapsed() >= EVERY);
        if !due {
            return;
        }
        let end = match pending.bytes.iter().rposition(|b| *b == b'\n') {
            Some(newline) => newline + 1,
            None if pending.bytes.len() > MAX_PENDING_BYTES => pending.bytes.len(),
            None => return,
        };
        let lines: Vec<u8> = pending.bytes.drain(..end).collect();
        pending.last = Some(Instant::now());
        drop(pending);
        self.report(&lines);
    }

    /// What is still waiting, once the code has stopped.
    pub(crate) fn finish(&self) {
        let mut pending = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let rest = std::mem::take(&mut pending.bytes);
        drop(pending);
        self.report(&rest);
    }

    fn report(&self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            return;
        }
        let chars = text.chars().count();
        let kept: String = if chars > MAX_REPORT_CHARS {
            let tail: String = text.chars().skip(chars - MAX_REPORT_CHARS).collect();
            format!("…{tail}")
        } else {
            text.to_string()
        };
        self.progress.report(kept);
    }
}
