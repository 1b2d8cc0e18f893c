//! A local GGUF model run in-process through llama.cpp, behind core's `ChatModel` trait: the
//! engine cannot tell it from the OpenAI-compatible client.
//!
//! - [`LocalModel::load`] checks the file (present, GGUF, whole, a chat template, the
//!   context within the trained one, memory), memory-maps the weights once and starts one
//!   worker thread per context (`parallel`); requests queue fairly for a context.
//! - A prompt is the model's own chat template (`tokenizer.chat_template`) rendered with
//!   minijinja ([`ChatTemplate`]), tools included.
//! - Each context keeps its KV cache: a request takes the idle context sharing the longest
//!   prefix with its prompt, so a turn's next round decodes only what is new.
//! - Replies stream as deltas ([`ReplyStream`]); calls written as `<tool_call>` blocks or as a
//!   fenced JSON block naming an offered tool become tool calls ([`read_reply`]).
//! - [`LocalModel::complete_constrained`] decodes under a grammar: a forced tool call or a
//!   JSON-Schema reply.
//!
//! Without the `llama` feature only the template renderer and the reply readers are built
//! (they need no C++ toolchain).

mod config;
mod error;
mod reply;
mod stream;
mod template;

#[cfg(feature = "llama")]
mod backend;
#[cfg(feature = "llama")]
mod gguf;
#[cfg(feature = "llama")]
mod model;
#[cfg(feature = "llama")]
mod worker;

pub use config::{DEFAULT_CONTEXT, LocalConfig, model_cache_dir};
pub use error::LocalError;
pub use reply::{ReadReply, read_reply};
pub use stream::ReplyStream;
pub use template::{ChatTemplate, TemplateError};

#[cfg(feature = "llama")]
pub use gguf::{GgufInfo, available_memory, inspect};
#[cfg(feature = "llama")]
pub use model::{CallStats, Constraint, LocalModel};
