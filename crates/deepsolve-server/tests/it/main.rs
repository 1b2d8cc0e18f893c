//! The integration tests of deepsolve-server, as one test binary (one link, one process start).

mod api;
mod config_keys;
mod openai_facade;
mod openapi;
mod support;
mod tools;
