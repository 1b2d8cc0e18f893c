//! The integration tests of deepsolve-cli, as one test binary (one link, one process start).

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_access;
mod cli;
mod code_tools;
mod connections;
mod did_you_mean;
mod disabled_tools;
mod doc_links;
mod eval;
mod gc;
mod geogebra;
mod habits;
mod images;
mod import_deeptutor;
mod ingest_stop;
mod kb;
mod kb_replicas;
mod local_model;
mod local_real;
mod memory_probe;
mod models;
mod prompts;
mod protocols;
mod real_spine;
mod reply_memory;
mod serve;
mod sessions;
mod support;
mod tool_settings;
mod web;
