//! The integration tests of deepsolve-store, as one test binary (one link, one process start).

mod store;
mod stored_rows;
