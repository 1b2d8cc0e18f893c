//! The integration tests of deepsolve-server, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod artifacts;
mod browser_auth;
mod config_keys;
mod evals;
mod gc;
mod images;
mod knowledge;
mod openai_facade;
mod openapi;
mod prompts;
mod support;
mod tools;
mod web_ui;
