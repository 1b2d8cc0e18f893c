//! deepsolve-local's tests: the template, the reply readers and the stream need no weights;
//! `real` runs the testkit's real model (`DEEPSOLVE_TEST_MODEL`, the 0.5B one scripts/test
//! fetches) and prints a SKIP line without it outside CI.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reply;
mod stream;
mod template;

#[cfg(feature = "llama")]
mod files;
#[cfg(feature = "llama")]
mod real;
