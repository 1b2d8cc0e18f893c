//! deepsolve-net's integration tests: the egress guard and the fetcher against loopback
//! fixtures (`deepsolve_testkit::web`, reached through the `test-loopback` switch, which the
//! crate's dev-dependency on itself turns on), every search provider in its vendor's response
//! shapes.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod egress;
mod fetch;
mod search;
