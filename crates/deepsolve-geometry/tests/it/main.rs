//! The integration tests of deepsolve-geometry, as one test binary.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod commands;
mod props;
mod svg;
