//! What a local model is run with (`llm.local.*`).

use std::path::PathBuf;

/// Tokens per context when none is set: room for the engine's prompt, a long history and a
/// reply, at a KV cache a small model can afford (≈ 100 MiB for Qwen2.5-0.5B).
pub const DEFAULT_CONTEXT: u32 = 8192;

/// How a local model is loaded and served.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// The GGUF file.
    pub model: PathBuf,
    /// Tokens each context holds (prompt and reply); at most the model's trained context.
    pub context: u32,
    /// Threads per request; `None`: the machine's available parallelism.
    pub threads: Option<u32>,
    /// Requests served at once, each with its own context (KV cache); more wait in order.
    pub parallel: u32,
    /// The name in events and logs; `None`: the file's name without `.gguf`.
    pub name: Option<String>,
}

impl LocalConfig {
    /// The defaults for `model`.
    pub fn new(model: impl Into<PathBuf>) -> Self {
        LocalConfig {
            model: model.into(),
            context: DEFAULT_CONTEXT,
            threads: None,
            parallel: 1,
            name: None,
        }
    }

    /// The model's name: set, or the file's stem.
    pub fn display_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            self.model
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "local".to_string())
        })
    }

    /// Threads per request, resolved.
    pub fn thread_count(&self) -> u32 {
        self.threads.filter(|t| *t > 0).unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(1))
                .unwrap_or(1)
        })
    }
}

/// The default model cache, as `scripts/fetch-model` and `deepsolve models` fill it:
/// `$DEEPSOLVE_MODELS`, else `~/.cache/deepsolve/models` (the one rule: `deepsolve-models`).
pub fn model_cache_dir() -> Option<PathBuf> {
    deepsolve_models::models_dir()
}
