//! The integration tests of deepsolve-core, as one test binary (one link, one process start).

mod common;
mod engine;
