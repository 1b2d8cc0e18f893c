//! llama.cpp's backend: initialised once per process, never freed, its logs silenced (they
//! would otherwise go to stderr under the CLI's display).

use std::sync::OnceLock;

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::{LogOptions, send_logs_to_tracing};

use crate::error::LocalError;

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

pub(crate) fn backend() -> Result<&'static LlamaBackend, LocalError> {
    BACKEND
        .get_or_init(|| {
            send_logs_to_tracing(LogOptions::default().with_logs_enabled(false));
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|message| LocalError::Load {
            path: std::path::PathBuf::new(),
            message: format!("llama.cpp's backend did not start: {message}"),
        })
}
