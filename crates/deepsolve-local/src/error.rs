//! Why a local model could not be made ready. Each names the file and what to do.

use std::path::PathBuf;

use crate::template::TemplateError;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("no model file at {}: fetch one with scripts/fetch-model, or set llm.local.model", path.display())]
    Missing { path: PathBuf },
    #[error("cannot read the model file {}: {message}", path.display())]
    Unreadable { path: PathBuf, message: String },
    #[error("{} is not a GGUF model: it starts with {found}, where a GGUF file starts with \"GGUF\"", path.display())]
    NotGguf { path: PathBuf, found: String },
    #[error("{} is truncated: it has {actual} bytes and its header describes {expected}; fetch it again", path.display())]
    Truncated {
        path: PathBuf,
        actual: u64,
        expected: u64,
    },
    #[error("{} has an unreadable GGUF header (llama.cpp's reader refused it)", path.display())]
    BadHeader { path: PathBuf },
    #[error(
        "{} needs about {needed_mib} MiB of memory (weights and {parallel} context(s) of {context} \
         tokens) and {available_mib} MiB are available; pick a smaller model, a shorter \
         llm.local.context or a lower llm.local.parallel",
        path.display()
    )]
    TooLarge {
        path: PathBuf,
        needed_mib: u64,
        available_mib: u64,
        context: u32,
        parallel: u32,
    },
    #[error(
        "llm.local.context is {asked} tokens but {} was trained for at most {trained}",
        path.display()
    )]
    ContextTooLong {
        path: PathBuf,
        asked: u32,
        trained: u32,
    },
    #[error(
        "{} has no chat template (GGUF key tokenizer.chat_template): use an instruct/chat model",
        path.display()
    )]
    NoChatTemplate { path: PathBuf },
    /// (`error` is not a `#[source]`: the message already says it, and a printed chain
    /// would say it twice.)
    #[error("the chat template of {}: {error}", path.display())]
    Template { path: PathBuf, error: TemplateError },
    #[error(
        "this CPU lacks {missing}, which this build of llama.cpp uses; rebuild with e.g. \
         GGML_AVX2=OFF GGML_FMA=OFF in the environment"
    )]
    CpuUnsupported { missing: String },
    #[error("llama.cpp could not load {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("llama.cpp could not create a context of {context} tokens: {message}")]
    Context { context: u32, message: String },
    #[error("invalid local model setting: {0}")]
    Config(String),
}
