//! deepsolve-net's integration tests: the egress guard and the fetcher against loopback
//! fixtures (`deepsolve_testkit::web`), every search provider in its vendor's response shapes.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod egress;
mod fetch;

/// The fixture suites need the loopback switch; `cargo test --workspace` turns it on through
/// deepsolve-tools' dev-dependency, `cargo test -p deepsolve-net` needs `--features
/// test-loopback`. Without it this fails instead of the suites silently not running.
#[cfg(not(feature = "test-loopback"))]
#[test]
fn the_loopback_switch_is_compiled_in() {
    panic!("run deepsolve-net's tests with --features test-loopback");
}
