//! deepsolve-local's tests: the template, the reply readers and the stream need no weights;
//! `real` runs the 0.5B test model when it is in the model cache (scripts/fetch-model
//! qwen2.5-coder-0.5b-instruct-q4_k_m) and prints a SKIP line otherwise.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reply;
mod stream;
mod template;

#[cfg(feature = "llama")]
mod files;
#[cfg(feature = "llama")]
mod real;
