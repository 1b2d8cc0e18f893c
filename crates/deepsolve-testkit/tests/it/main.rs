//! The integration tests of deepsolve-testkit, as one test binary (one link, one process start).

mod common;
mod engine_turns;
mod policies;
mod server;
mod tags;
