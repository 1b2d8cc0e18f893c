//! An HTTP client made at its first use: making one loads the system's root certificates,
//! which every process that mounts a web tool would otherwise pay before its first model
//! request, whether the tool is called or not.

use std::sync::{Arc, OnceLock};

/// A `reqwest::Client` built on first use; clones share it. A failed build is kept (as its
/// message) and returned to every later caller.
#[derive(Debug, Clone, Default)]
pub(crate) struct LazyClient(Arc<OnceLock<Result<reqwest::Client, String>>>);

impl LazyClient {
    /// The client, built by `build` if this is the first use.
    pub(crate) fn get(
        &self,
        build: impl FnOnce() -> reqwest::Result<reqwest::Client>,
    ) -> Result<&reqwest::Client, String> {
        let made = self
            .0
            .get_or_init(|| build().map_err(|e| crate::fetch::error_chain(&e)));
        made.as_ref().map_err(Clone::clone)
    }
}
