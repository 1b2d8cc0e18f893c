//! The typed settings. Every section rejects unknown keys (`deny_unknown_fields`) so a struct
//! deserialised on its own is as strict as the loader; the loader itself checks keys first
//! against [`crate::schema`] to produce messages that name the full key and its origin.

use std::fmt;
use std::path::PathBuf;

use crate::error::SettingsError;
use deepsolve_core::SolveConfig;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// All settings, after layering, validation and clamping.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Settings {
    pub llm: LlmSettings,
    pub models: ModelsSettings,
    pub solve: SolveConfig,
    pub tools: ToolsSettings,
    pub sandbox: SandboxSettings,
    pub server: ServerSettings,
    pub kb: KbSettings,
    /// Replacements for the texts the model reads ([`crate::prompts`]).
    pub prompts: crate::prompts::PromptsSettings,
}

/// The main model endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmSettings {
    /// OpenAI-compatible base URL (e.g. `https://api.deepseek.com/v1`).
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The key, resolved from (highest first) `--set`, `DEEPSOLVE_API_KEY`, `OPENAI_API_KEY`,
    /// the variable named by `api_key_env`, the file. `Debug` shows `[REDACTED]`; it is never
    /// serialised (see [`Settings::redacted_value`]).
    #[serde(skip)]
    pub api_key: Option<SecretString>,
    /// Where `api_key` came from, so it can be reported without showing it.
    #[serde(skip)]
    pub api_key_source: Option<ApiKeySource>,
    /// Name of an environment variable holding the key (keeps the key itself out of the file).
    pub api_key_env: Option<String>,
    /// Overrides the model catalog's window; clamped to 1 024–10 000 000.
    pub context_window: Option<u64>,
    pub protocol: Protocol,
    /// Extra JSON fields merged into every request body (provider-specific switches).
    pub extra_body: Map<String, Value>,
    /// The most one reply may hold (content, reasoning and tool-call arguments together), MiB;
    /// a longer reply ends its round with a named error. Clamped to 1–64.
    pub max_reply_mb: u64,
    /// What the model costs, for showing a turn's cost; unset = not shown.
    pub price: Option<PriceSettings>,
    /// Whether the model sees images: `auto` asks it once (one tiny image) and remembers the
    /// answer for the process; `true`/`false` say so without asking.
    pub vision: Vision,
    /// Where the main model runs: an OpenAI-compatible endpoint (`openai`, the default) or
    /// in this process (`local`: `llm.local`).
    pub provider: Provider,
    /// The in-process model, when `provider` is `local`.
    pub local: LocalSettings,
    /// When the endpoint is probed for what it honours at decoding time (the verdict is kept
    /// per endpoint and model): on its first use, or only by `deepsolve doctor`.
    pub probe: ProbeWhen,
}

/// `llm.probe`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeWhen {
    /// Before the first turn on an endpoint and model with no verdict kept (or a stale one).
    #[default]
    FirstUse,
    /// Only `deepsolve doctor` probes; without a verdict nothing is known, and `solve.enforce:
    /// auto` holds the spine by the prompt alone.
    Never,
}

/// `llm.provider`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    #[default]
    Openai,
    Local,
}

/// `llm.local`: a GGUF model run in-process (deepsolve-local).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalSettings {
    /// The GGUF file; unset: `qwen2.5-coder-1.5b-instruct-q4_k_m.gguf` in the model cache
    /// (`$DEEPSOLVE_MODELS`, else `~/.cache/deepsolve/models`; `scripts/fetch-model`).
    pub model: Option<String>,
    /// Tokens per context (prompt and reply); at most the model's trained context.
    pub context: u32,
    /// Threads per request; unset: the machine's available parallelism.
    pub threads: Option<u32>,
    /// Requests served at once, each with its own context; more wait in order.
    pub parallel: u32,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings {
            model: None,
            context: 8192,
            threads: None,
            parallel: 1,
        }
    }
}

/// `llm.vision`: `auto`, `true` or `false` (a YAML boolean or the word).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Vision {
    /// Probe the model the first time a turn has images, and remember the answer.
    #[default]
    Auto,
    /// It sees images: they go with the problem, unprobed.
    Sees,
    /// It does not: images go only to tools that read them.
    Blind,
}

impl Vision {
    pub fn as_str(self) -> &'static str {
        match self {
            Vision::Auto => "auto",
            Vision::Sees => "true",
            Vision::Blind => "false",
        }
    }
}

impl Serialize for Vision {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Vision::Auto => serializer.serialize_str("auto"),
            Vision::Sees => serializer.serialize_bool(true),
            Vision::Blind => serializer.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for Vision {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(true) => Ok(Vision::Sees),
            Value::Bool(false) => Ok(Vision::Blind),
            Value::String(s) if s == "auto" => Ok(Vision::Auto),
            Value::String(s) if s == "true" => Ok(Vision::Sees),
            Value::String(s) if s == "false" => Ok(Vision::Blind),
            other => Err(serde::de::Error::custom(format!(
                "expected auto, true or false, got {other}"
            ))),
        }
    }
}

/// The main model's price per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceSettings {
    /// Per million prompt tokens; clamped to 0–1 000 000.
    pub input_per_mtok: f64,
    /// Per million completion tokens; clamped to 0–1 000 000.
    pub output_per_mtok: f64,
    /// As shown next to the amount; `USD` when unset.
    #[serde(default = "default_currency")]
    pub currency: String,
}

fn default_currency() -> String {
    "USD".to_string()
}

impl Default for LlmSettings {
    fn default() -> Self {
        LlmSettings {
            base_url: None,
            model: None,
            api_key: None,
            api_key_source: None,
            api_key_env: None,
            context_window: None,
            protocol: Protocol::default(),
            extra_body: Map::new(),
            max_reply_mb: 4,
            price: None,
            vision: Vision::Auto,
            provider: Provider::default(),
            local: LocalSettings::default(),
            probe: ProbeWhen::default(),
        }
    }
}

/// How tool calls are exchanged with the model: the core's own type, so the
/// setting and the engine cannot drift apart.
pub use deepsolve_core::Protocol;

/// Secondary models used by specific tools.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsSettings {
    /// The model behind the `reason` tool.
    pub reason: Option<ModelRef>,
    /// The model that reads images.
    pub vision: Option<ModelRef>,
    /// The embedding model of knowledge-base search (an OpenAI-compatible `/embeddings`);
    /// unset = BM25 only.
    pub embedding: Option<ModelRef>,
}

/// Another model, on the main endpoint unless `base_url` is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRef {
    pub model: String,
    #[serde(default)]
    pub base_url: Option<String>,
    /// Variable holding this endpoint's key; unset = the main key.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// Tool toggles, and the tools' own sections.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsSettings {
    /// Opt-in tools offered on every turn by default (e.g. `reason`).
    pub enabled: Vec<String>,
    /// Tools switched off, automatic ones included (e.g. `code_execution`): never built,
    /// never offered, whatever `enabled` or a turn asks for. The app checks the names.
    pub disabled: Vec<String>,
    /// `tools.<tool>` for each tool whose section has values, checked against the tool's
    /// [`ToolSection`](crate::ToolSection) (clamped, blanks dropped). Filled by the loader,
    /// never from the `tools` mapping itself (whose other keys stay strict); read it with
    /// [`Settings::tool_settings`].
    #[serde(flatten, skip_deserializing)]
    pub sections: Map<String, Value>,
}

/// How model code is isolated, and what one turn's sandboxed processes may use together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    /// `auto` (bubblewrap when it works, else no code tools), `bwrap` (required), or `none`
    /// (no isolation: an explicit, loudly warned opt-out). `tools.sandbox` is its old name.
    pub backend: String,
    /// Memory of all the turn's sandboxed processes together, MiB.
    pub memory_mb: u64,
    /// Processes (and threads) of the turn's sandboxes together.
    pub max_processes: u64,
    /// Bytes the turn's workspace may hold, MiB.
    pub workspace_mb: u64,
    /// Files (and directories) the turn's workspace may hold.
    pub workspace_files: u64,
    /// Days a finished turn's workspace is kept; empty ones go at the next collection.
    pub retention_days: u64,
    /// The seccomp filter of sandboxed processes; `false` is an explicit, warned opt-out.
    pub seccomp: bool,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            backend: "auto".to_string(),
            memory_mb: 2048,
            max_processes: 64,
            workspace_mb: 1024,
            workspace_files: 10_000,
            retention_days: 7,
            seccomp: true,
        }
    }
}

/// `deepsolve serve`: where it listens and stores, and the limits on every connection.
/// Command-line flags win over these.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// Listen address, e.g. `127.0.0.1:8080`.
    pub addr: Option<String>,
    /// `sqlite://PATH` or `postgres://USER:PASS@HOST/DB`. A secret when it holds a password:
    /// `Debug` hides it, [`Settings::redacted_value`] masks the password.
    #[serde(skip)]
    pub database: Option<SecretString>,
    /// This instance's stable name (its running turns are marked interrupted on restart).
    pub instance_id: Option<String>,
    /// Browser origins allowed to call the API cross-origin; none by default.
    pub cors_origins: Vec<String>,
    /// Seconds a client may take to send a request's headers.
    pub header_timeout_s: u64,
    /// Seconds a client may take to send a request's body.
    pub body_timeout_s: u64,
    /// Seconds a kept-alive connection may wait for its next request.
    pub idle_timeout_s: u64,
    /// Connections served at once; more are refused.
    pub max_connections: u64,
    /// Hours a web UI sign-in lasts (its browser session); clamped to 1–720.
    pub session_hours: u64,
    /// Mark the session cookie `Secure` on every response (the server is reached over https
    /// only, e.g. behind a TLS proxy).
    pub secure_cookies: bool,
    /// Believe the `X-Forwarded-Proto` header (set it only behind a proxy that sets it): the
    /// cookie is `Secure` on requests that came over https, and the browser's origin is known.
    pub trust_forwarded_proto: bool,
    /// The server's public address (`https://solve.example.com`, a path prefix allowed): the
    /// absolute links it hands out (the OpenAI facade's artifact links) start with it. Unset:
    /// links only when the server is reached by a loopback address.
    pub public_url: Option<String>,
    /// Name of an environment variable holding the token Prometheus sends to `/metrics`
    /// (`Authorization: Bearer …`). With users, `/metrics` takes that token or an admin's.
    pub metrics_token_env: Option<String>,
    /// Hours an artifact link handed out by the OpenAI facade stays valid; clamped to 1–8760.
    pub artifact_link_hours: u64,
    /// Name of an environment variable holding the secret (32+ characters) that signs artifact
    /// links; set the same one on every replica. Unset: a key kept in the data directory.
    pub link_secret_env: Option<String>,
    /// Seconds a stopping server (SIGTERM, Ctrl-C) waits for its running turns and ingests
    /// to end before it exits; clamped to 1–600.
    pub shutdown_grace_s: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            addr: None,
            database: None,
            instance_id: None,
            cors_origins: Vec::new(),
            header_timeout_s: 10,
            body_timeout_s: 30,
            idle_timeout_s: 60,
            max_connections: 4096,
            session_hours: 12,
            secure_cookies: false,
            trust_forwarded_proto: false,
            public_url: None,
            metrics_token_env: None,
            artifact_link_hours: 168,
            link_secret_env: None,
            shutdown_grace_s: 10,
        }
    }
}

/// Knowledge bases: what one document and one knowledge base may hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KbSettings {
    /// Largest document accepted, MiB; clamped to 1–1 024.
    pub max_file_mb: u64,
    /// Most pages a document may have; clamped to 1–100 000.
    pub max_pages: u64,
    /// Most passages (chunks) one knowledge base may hold; clamped to 100–10 000 000.
    pub max_chunks: u64,
    /// Seconds one document's ingest may take, every stage together (extraction, chunking,
    /// storing, embedding); past it the document fails naming the stage. Clamped to 10–86 400.
    pub ingest_timeout_s: u64,
}

impl Default for KbSettings {
    fn default() -> Self {
        KbSettings {
            max_file_mb: 50,
            max_pages: 2_000,
            max_chunks: 200_000,
            ingest_timeout_s: 600,
        }
    }
}

/// Where the API key came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiKeySource {
    /// An environment variable, by name.
    Env(String),
    /// The settings file (stored in clear: discouraged, and warned about).
    File(PathBuf),
    /// A `--set llm.api_key=…` argument.
    Set,
}

impl fmt::Display for ApiKeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiKeySource::Env(var) => f.write_str(var),
            ApiKeySource::File(path) => write!(f, "{}", path.display()),
            ApiKeySource::Set => f.write_str("--set"),
        }
    }
}

impl Settings {
    /// The whole tree as JSON, safe to print or send: the key shows as `"*** (from <source>)"`
    /// (or `null` when there is none), never in clear.
    pub fn redacted_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("llm".into(), self.llm.redacted_value());
        out.insert("models".into(), to_value(&self.models));
        out.insert("solve".into(), to_value(&self.solve));
        out.insert("tools".into(), to_value(&self.tools));
        out.insert("sandbox".into(), to_value(&self.sandbox));
        out.insert("server".into(), self.server.redacted_value());
        out.insert("kb".into(), to_value(&self.kb));
        out.insert("prompts".into(), to_value(&self.prompts));
        Value::Object(out)
    }
}

impl Settings {
    /// The checked values of `tools.<tool>` (`None`: the section is empty or absent).
    pub fn tool_section(&self, tool: &str) -> Option<&Map<String, Value>> {
        self.tools.sections.get(tool).and_then(Value::as_object)
    }

    /// `tools.<tool>` as the tool's own settings struct; its `Default` when the section is
    /// empty. After loading, an error here means the struct and the tool's declaration
    /// disagree (a tool's test should load its section once to rule that out).
    pub fn tool_settings<T: DeserializeOwned + Default>(
        &self,
        tool: &str,
    ) -> Result<T, SettingsError> {
        let Some(section) = self.tool_section(tool) else {
            return Ok(T::default());
        };
        serde_json::from_value(Value::Object(section.clone())).map_err(|e| {
            SettingsError::ToolSection {
                tool: tool.to_string(),
                reason: e.to_string(),
            }
        })
    }
}

impl LlmSettings {
    fn redacted_value(&self) -> Value {
        let mut value = to_value(self);
        if let Value::Object(map) = &mut value {
            let shown = match (&self.api_key, &self.api_key_source) {
                (None, _) => Value::Null,
                (Some(_), Some(source)) => Value::String(format!("*** (from {source})")),
                (Some(_), None) => Value::String("***".into()),
            };
            map.insert("api_key".into(), shown);
        }
        value
    }
}

impl ServerSettings {
    fn redacted_value(&self) -> Value {
        let mut value = to_value(self);
        if let Value::Object(map) = &mut value {
            let shown = self.database.as_ref().map_or(Value::Null, |url| {
                Value::String(mask_password(url.expose_secret()))
            });
            map.insert("database".into(), shown);
        }
        value
    }
}

/// `url` with the password of its user info (`scheme://user:PASSWORD@host`) replaced by `***`.
pub(crate) fn mask_password(url: &str) -> String {
    match password_span(url) {
        Some((start, end)) => format!("{}***{}", &url[..start], &url[end..]),
        None => url.to_string(),
    }
}

/// Whether `url` carries a password in clear.
pub(crate) fn has_password(url: &str) -> bool {
    password_span(url).is_some_and(|(start, end)| end > start)
}

/// Byte range of the password in `scheme://user:password@host/…`, if there is one.
fn password_span(url: &str) -> Option<(usize, usize)> {
    let authority_start = url.find("://")? + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_len].rfind('@')?;
    let colon = rest[..at].find(':')?;
    Some((authority_start + colon + 1, authority_start + at))
}

/// Serialise a section. These types hold only strings, numbers and maps, so this cannot fail;
/// `null` is the harmless answer if it ever did.
fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn debug_and_redacted_value_hide_the_key() {
        let mut s = Settings::default();
        s.llm.api_key = Some(SecretString::from("sk-very-secret"));
        s.llm.api_key_source = Some(ApiKeySource::Env("DEEPSOLVE_API_KEY".into()));
        assert!(!format!("{s:?}").contains("sk-very-secret"));
        let v = s.redacted_value();
        assert!(!v.to_string().contains("sk-very-secret"));
        assert_eq!(v["llm"]["api_key"], json!("*** (from DEEPSOLVE_API_KEY)"));
    }

    #[test]
    fn redacted_value_shows_defaults_readably() {
        let v = Settings::default().redacted_value();
        assert_eq!(v["solve"]["temperature"], json!(0.3));
        assert_eq!(v["llm"]["api_key"], Value::Null);
        assert_eq!(v["llm"]["protocol"], json!("native"));
        assert_eq!(v["sandbox"]["backend"], json!("auto"));
        assert_eq!(v["sandbox"]["memory_mb"], json!(2048));
        assert_eq!(v["server"]["header_timeout_s"], json!(10));
        assert_eq!(v["server"]["database"], Value::Null);
    }

    #[test]
    fn passwords_are_masked_in_database_urls() {
        assert_eq!(
            mask_password("postgres://u:p%40ss@h:5432/db?x=1"),
            "postgres://u:***@h:5432/db?x=1"
        );
        assert_eq!(mask_password("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(mask_password("sqlite:///a@b/x.db"), "sqlite:///a@b/x.db");
        assert!(has_password("postgres://u:p@h/db"));
        assert!(!has_password("postgres://u:@h/db"));
        assert!(!has_password("sqlite://x:y.db"));
    }

    #[test]
    fn sections_are_strict_on_their_own() {
        let err = serde_json::from_value::<LlmSettings>(json!({"modle": "x"}));
        assert!(err.is_err());
        let err = serde_json::from_value::<ModelRef>(json!({"model": "x", "x": 1}));
        assert!(err.is_err());
    }

    #[test]
    fn tool_sections_come_only_from_the_loader() {
        let err = serde_json::from_value::<ToolsSettings>(json!({"web_search": {"a": 1}}));
        assert!(err.is_err(), "the tools mapping stays strict");
        let mut s = Settings::default();
        s.tools
            .sections
            .insert("web_search".into(), json!({"max_results": 3}));
        assert_eq!(
            s.redacted_value()["tools"],
            json!({"enabled": [], "disabled": [], "web_search": {"max_results": 3}})
        );
        let read: Map<String, Value> = s.tool_settings("web_search").unwrap();
        assert_eq!(read["max_results"], 3);
        assert!(s.tool_section("reason").is_none());
    }
}
