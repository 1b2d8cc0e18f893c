//! The integration tests of deepsolve-store, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kb;
mod store;
mod stored_rows;
