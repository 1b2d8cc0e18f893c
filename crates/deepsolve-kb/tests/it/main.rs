//! The crate's one integration-test binary.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chunk;
mod embed;
mod extract;
mod index;
mod ingest;
mod retrieve;

/// The fixture documents, shared with the server's and the CLI's tests.
pub(crate) use deepsolve_testkit::documents as fixtures;
