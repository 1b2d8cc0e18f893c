//! The integration tests of deepsolve-sandbox, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod as_root;
mod budget;
mod common;
mod environment;
mod output_cap;
mod python;
mod remember;
mod seccomp;
mod security;
