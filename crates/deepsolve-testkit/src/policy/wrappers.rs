//! Wrappers that change *how* another policy's replies travel: transient failures before the
//! reply, and the shape of the stream deltas. Counters count every call, sub-calls included.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::policy::Policy;
use crate::reply::{DeltaStyle, Reply};
use crate::request::PolicyRequest;

/// The first `times` calls fail with `status` (429 with `Retry-After` when `retry_after` is
/// set); later calls go to `inner`.
///
/// **Engine (client):** retries with backoff (honouring `Retry-After`) up to 4 attempts, before
/// any output. **Ending:** `times` ≤ 3 → whatever `inner` ends with, with `retrying` events;
/// more → `model_error` (rate_limited / server).
#[derive(Debug)]
pub struct FlakyStatus<P> {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub times: usize,
    pub inner: P,
    calls: AtomicUsize,
}

impl<P> FlakyStatus<P> {
    pub fn new(status: u16, times: usize, inner: P) -> Self {
        FlakyStatus {
            status,
            retry_after: None,
            times,
            inner,
            calls: AtomicUsize::new(0),
        }
    }

    pub fn retry_after(mut self, seconds: Option<u64>) -> Self {
        self.retry_after = seconds;
        self
    }

    fn failure(&self) -> Reply {
        let mut reply = match self.status {
            429 => Reply::rate_limited(None),
            status => Reply::status(status, format!("scripted failure with status {status}")),
        };
        if let (Some(secs), Reply::Status { headers, .. }) = (self.retry_after, &mut reply) {
            headers.push(("retry-after".into(), secs.to_string()));
        }
        reply
    }
}

impl<P: Policy> Policy for FlakyStatus<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.times {
            return self.failure();
        }
        self.inner.reply(req)
    }
}

/// The first `times` calls send headers and close the connection without data; later calls go
/// to `inner`.
///
/// **Engine (client):** a stream cut before any output is retried. **Ending:** as `inner`
/// when `times` ≤ 3, else `model_error` (transport).
#[derive(Debug)]
pub struct CutBeforeOutput<P> {
    pub times: usize,
    pub inner: P,
    calls: AtomicUsize,
}

impl<P> CutBeforeOutput<P> {
    pub fn new(times: usize, inner: P) -> Self {
        CutBeforeOutput {
            times,
            inner,
            calls: AtomicUsize::new(0),
        }
    }
}

impl<P: Policy> Policy for CutBeforeOutput<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.times {
            return Reply::CutBeforeOutput;
        }
        self.inner.reply(req)
    }
}

/// `inner`'s replies streamed with a given [`DeltaStyle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithStyle<P> {
    pub style: DeltaStyle,
    pub inner: P,
}

impl<P: Policy> Policy for WithStyle<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        self.inner.reply(req).map_turn(|t| t.with_style(self.style))
    }
}

/// `inner`'s replies with `id` and `function.name` repeated on every tool-call delta.
///
/// **Engine (client, R10):** replaces ids and names instead of concatenating them; the calls
/// arrive intact. **Ending:** as `inner`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepeatedIdName<P> {
    pub inner: P,
}

impl<P: Policy> Policy for RepeatedIdName<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        self.inner.reply(req).map_turn(|mut t| {
            t.style.repeat_id_and_name = true;
            t
        })
    }
}

/// `inner`'s replies without `index` on tool-call deltas (ids still sent).
///
/// **Engine (client):** accumulates by id, then by position. **Ending:** as `inner`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoIndexDeltas<P> {
    pub inner: P,
}

impl<P: Policy> Policy for NoIndexDeltas<P> {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        self.inner.reply(req).map_turn(|mut t| {
            t.style.with_index = false;
            t
        })
    }
}
