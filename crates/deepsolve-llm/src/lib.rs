//! deepsolve-llm: a thin OpenAI-compatible streaming chat client.
//!
//! [`OpenAiClient`] implements [`deepsolve_core::ChatModel`] against any server that speaks the
//! `/chat/completions` streaming protocol (OpenAI, DeepSeek, DashScope, vLLM, SGLang, llama.cpp,
//! Ollama, LM Studio, OpenRouter, …). We keep our own client rather than a generic SDK because the
//! SDKs drop `reasoning_content`, mishandle tool-call deltas without `index`, or swallow stream
//! errors.
//!
//! The pieces are public so they can be tested and reused on their own:
//! - [`wire`]: the request body and the stream chunk shapes;
//! - [`sse`]: a small byte-level Server-Sent-Events parser with size caps;
//! - [`accumulate`]: the delta accumulator that turns chunks into a [`deepsolve_core::Completion`];
//! - [`estimate`]: local token estimates when the provider reports no usage;
//! - [`retry`]: backoff and `Retry-After` arithmetic;
//! - [`probe`]: what an endpoint honours at decoding time, asked the way a solve asks, and
//!   [`verdicts`]: the verdicts kept between processes.

pub mod accumulate;
mod classify;
mod client;
mod config;
pub mod estimate;
pub mod probe;
pub mod retry;
pub mod sse;
pub mod verdicts;
pub mod wire;

pub use accumulate::{
    DEFAULT_MAX_REPLY_BYTES, ReplyTooLarge, StreamAccumulator, ToolCallAccumulator, ToolCallDelta,
    synthesize_call_id,
};
pub use client::OpenAiClient;
pub use config::{ClientConfig, ClientError};
pub use probe::{Capability, Finding, ProbeSpec, Verdict, WindowSource};
