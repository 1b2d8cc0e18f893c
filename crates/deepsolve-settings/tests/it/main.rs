//! The integration tests of deepsolve-settings, as one test binary (one link, one process start).

mod did_you_mean;
mod knobs_prop;
mod load;
mod set_in_file;
mod set_many_in_file;
mod tool_sections;
