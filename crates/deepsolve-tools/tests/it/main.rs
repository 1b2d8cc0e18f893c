//! The integration tests of deepsolve-tools, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog;
mod code;
mod geogebra;
mod knowledge;
mod reason;
mod web_fetch;
mod web_search;
