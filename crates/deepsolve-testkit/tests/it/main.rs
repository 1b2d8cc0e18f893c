//! The integration tests of deepsolve-testkit, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod answers;
mod common;
mod decoding;
mod engine_turns;
mod kb_cite;
mod policies;
mod real_server;
mod server;
mod tags;
