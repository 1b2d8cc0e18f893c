//! The integration tests of deepsolve-llm, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod accumulator_props;
mod client;
mod probe;
mod providers;
mod reply_cap;
mod support;
