//! The integration tests of deepsolve-settings, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod did_you_mean;
mod knobs_prop;
mod load;
mod set_in_file;
mod set_many_in_file;
mod tool_sections;
