//! The integration tests of deepsolve-cli, as one test binary (one link, one process start).

mod cli;
mod code_tools;
mod did_you_mean;
mod protocols;
mod serve;
mod support;
mod tool_settings;
