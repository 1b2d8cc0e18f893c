//! Layered settings of the deepsolve engine.
//!
//! Layers, lowest to highest: built-in defaults < YAML file < environment < `--set KEY=VALUE`.
//! The file is read into a JSON tree, the environment and `--set` are applied as dotted-path
//! writes into it, then the whole tree is checked strictly — unknown keys and wrong types are
//! errors naming the full key and the file, variable or argument it came from — and every
//! numeric knob is clamped with a warning. The `solve` section is core's
//! [`SolveConfig`](deepsolve_core::SolveConfig), checked by `SolveConfig::from_map`. Under
//! `tools`, besides `enabled` and `disabled` (and `sandbox`, the deprecated name of `sandbox.backend`), each tool may have a section of its own,
//! `tools.<tool>`, whose keys the tool declares ([`ToolSection`]) and the loader is given
//! ([`LoadOptions::tool_sections`]): it is checked as strictly as every other key, and the
//! tool reads it with [`Settings::tool_settings`].
//!
//! ```no_run
//! use deepsolve_settings::{LoadOptions, load};
//! let opts = LoadOptions {
//!     env: std::env::vars().collect(),
//!     sets: vec!["solve.max_rounds=5".into()],
//!     ..LoadOptions::default()
//! };
//! let loaded = load(&opts)?;
//! for warning in &loaded.warnings {
//!     eprintln!("warning: {warning}");
//! }
//! # Ok::<(), deepsolve_settings::SettingsError>(())
//! ```
//!
//! Environment: `DEEPSOLVE_BASE_URL`, `DEEPSOLVE_MODEL`, `DEEPSOLVE_CONTEXT_WINDOW`,
//! `DEEPSOLVE_PROTOCOL`; the key from `DEEPSOLVE_API_KEY`, else `OPENAI_API_KEY`, else the
//! variable named by `llm.api_key_env`; and any key as `DEEPSOLVE_<SECTION>__<KEY>`
//! (case-insensitive, e.g. `DEEPSOLVE_SOLVE__MAX_ROUNDS=5`, `DEEPSOLVE_TOOLS__REASON__MAX_TOKENS=4000`).
//!
//! Secrets: the API key is a [`secrecy::SecretString`]; `Debug` hides it,
//! [`Settings::redacted_value`] shows `"*** (from <source>)"`, and [`set_in_file`] refuses to
//! write it. `server.database` is one too when its URL holds a password: masked as
//! `postgres://user:***@host/db`, and never written by [`set_in_file`] with the password.

mod edit;
mod error;
pub mod import;
mod layers;
mod load;
mod model;
pub mod prompts;
mod schema;
mod tree;
mod validate;
mod write;
mod yaml;

pub use error::{Origin, SettingsError};
pub use load::{CONFIG_ENV, LoadOptions, Loaded, get, load, resolve_path};
pub use model::{
    ApiKeySource, KbSettings, LlmSettings, LocalSettings, ModelRef, ModelsSettings, PriceSettings,
    ProbeWhen, Protocol, Provider, SandboxSettings, ServerSettings, Settings, ToolsSettings,
    Vision,
};
pub use schema::{Builtin, Clamp, Field, Kind, ToolSection, all_keys};
pub use write::{set_in_file, set_many_in_file};
pub use yaml::MAX_FILE_BYTES;
