//! The crate's one integration-test binary.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chunk;
mod extract;
mod fixtures;
