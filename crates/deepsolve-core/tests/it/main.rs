//! The integration tests of deepsolve-core, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod answers;
mod citations;
mod common;
mod engine;
mod images;
mod live_output;
mod protocols;
