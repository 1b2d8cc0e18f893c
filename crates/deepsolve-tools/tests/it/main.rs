//! The integration tests of deepsolve-tools, as one test binary (one link, one process start).

mod code;
mod reason;
