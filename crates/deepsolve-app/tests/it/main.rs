//! The integration tests of deepsolve-app, as one test binary.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod app;
mod gc;
mod interp;
mod knowledge;
mod life;
mod turn;
mod vision;
mod writer;
