//! The integration tests of deepsolve-tools, as one test binary (one link, one process start).

mod catalog;
mod code;
mod reason;
