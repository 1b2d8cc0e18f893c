//! The integration tests of deepsolve-app, as one test binary.

mod app;
mod turn;
