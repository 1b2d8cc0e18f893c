//! The integration tests of deepsolve-protocol, as one test binary.

mod schemas;
mod typescript;
