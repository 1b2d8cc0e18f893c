//! The integration tests of deepsolve-llm, as one test binary (one link, one process start).

mod accumulator_props;
mod client;
mod providers;
mod support;
