//! The integration tests of deepsolve-sandbox, as one test binary (one link, one process start).

mod as_root;
mod common;
mod environment;
mod output_cap;
mod python;
mod security;
