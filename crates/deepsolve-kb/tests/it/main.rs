//! The crate's one integration-test binary.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chunk;
mod embed;
mod extract;
mod fixtures;
mod index;
mod retrieve;
