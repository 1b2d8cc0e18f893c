//! The integration tests of deepsolve-eval, as one test binary.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod data;
mod extract;
mod grader_table;
mod hostile;
mod report;
mod runner;
mod stats;
mod sympy;
