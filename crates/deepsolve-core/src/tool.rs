//! The `Tool` trait and the out-of-band context every tool call receives.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::citations::Citations;
use crate::config::SolveConfig;
use crate::image::TurnImage;
use crate::model::{ToolSpec, Usage};
use crate::solve::Language;

/// Server-side context for a tool call. It never travels through the model's arguments, so a
/// model cannot forge a turn id, a workspace or a user. `Default` is a context of no turn (for
/// tests and tools called outside a turn): no material, an empty numbering.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    pub turn_id: String,
    pub session_id: Option<String>,
    pub user_id: Option<String>,
    pub workspace: Option<PathBuf>,
    pub call_id: String,
    /// The turn's language: what a tool writes for the model follows it.
    pub language: Language,
    pub cancel: CancellationToken,
    /// When the engine stops waiting for this call (its timeout, never past the turn's
    /// deadline). A tool that can return partial output should stop a little before it.
    pub deadline: Option<tokio::time::Instant>,
    /// What the turn may read (knowledge bases, documents); `None` for a turn without any.
    pub material: Option<Arc<Material>>,
    /// The turn's citation numbering: a tool that finds sources registers them here, so the
    /// same passage has the same `[n]` in every call of the turn.
    pub citations: Arc<Citations>,
    /// The images the turn was given (empty for most turns): a tool that reads figures
    /// (`geogebra_analysis`) takes them from here, never from the model's arguments.
    pub images: Arc<[TurnImage]>,
    /// Where the call reports what it is doing while it runs (`tool_progress` events: code's
    /// output as it prints); a context of no turn reports nowhere.
    pub progress: Progress,
}

/// The most `tool_progress` events one call emits; what it reports past them is dropped (its
/// result still has everything).
pub const MAX_PROGRESS_PER_CALL: u32 = 200;

/// A call's progress reporter: cheap to clone, never blocks, bounded per call
/// ([`MAX_PROGRESS_PER_CALL`]). The engine turns each report into a `tool_progress` event
/// of the call, before its `tool_result`.
#[derive(Clone, Default)]
pub struct Progress {
    to: Option<ProgressTo>,
}

#[derive(Clone)]
struct ProgressTo {
    sender: tokio::sync::mpsc::UnboundedSender<(String, String)>,
    call_id: String,
    sent: Arc<std::sync::atomic::AtomicU32>,
}

/// Where a reporter's reports arrive: `(call id, message)`.
pub type ProgressReceiver = tokio::sync::mpsc::UnboundedReceiver<(String, String)>;

impl Progress {
    /// A reporter, and where its reports arrive (the engine's, for a batch of calls; a test's).
    pub fn channel() -> (Progress, ProgressReceiver) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let to = ProgressTo {
            sender,
            call_id: String::new(),
            sent: Arc::default(),
        };
        (Progress { to: Some(to) }, receiver)
    }

    /// This reporter, for the call `call_id` (with a count of its own).
    pub fn for_call(&self, call_id: &str) -> Progress {
        let to = self.to.as_ref().map(|to| ProgressTo {
            sender: to.sender.clone(),
            call_id: call_id.to_string(),
            sent: Arc::default(),
        });
        Progress { to }
    }

    /// Report `message` (one line or a few); dropped past the call's bound or outside a turn.
    pub fn report(&self, message: impl Into<String>) {
        let Some(to) = &self.to else {
            return;
        };
        let sent = to.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if sent < MAX_PROGRESS_PER_CALL {
            // The engine stopped listening: the turn is over, nothing to tell.
            let _ = to.sender.send((to.call_id.clone(), message.into()));
        }
    }

    /// Whether reports go anywhere (a tool can skip the work of making them).
    pub fn is_listened(&self) -> bool {
        self.to.is_some()
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("call_id", &self.to.as_ref().map(|to| &to.call_id))
            .finish()
    }
}

impl ToolContext {
    /// Time left before `deadline`, less `margin`, at least a millisecond; `fallback` when
    /// the call has no deadline.
    pub fn time_left(&self, margin: Duration, fallback: Duration) -> Duration {
        self.deadline
            .map(|d| {
                d.saturating_duration_since(tokio::time::Instant::now())
                    .saturating_sub(margin)
                    .max(Duration::from_millis(1))
            })
            .unwrap_or(fallback)
    }
}

/// Files, citation sources and a turn's material are wire types (events, the turn record);
/// a drawn file's hash is made by the protocol's one helper.
pub use deepsolve_protocol::{
    Artifact, Material, MaterialDocument, MaterialKb, ShownArgument, Source, sha256_hex,
};

/// What a tool returns. `content` is what the model will see (the loop truncates it);
/// everything else goes to events and the turn record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ToolOutput {
    pub content: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The citation sources the content numbers, each as `ctx.citations.register` returned
    /// it (so `[n]` in the content is the turn's number): they go on the call's
    /// `tool_result` event, and the answer's event carries the ones it cites.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub metadata: Value,
    /// Model tokens the tool spent (e.g. a reasoning sub-call); added to the turn's usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            ok: true,
            ..Default::default()
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            ok: false,
            ..Default::default()
        }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;

    /// What the tool is for, as one line of the playbook in `language` (e.g. "`exec`: produce
    /// files"). `None`: the playbook says "`name`: description". The catalog's tools get
    /// theirs from their catalog entry (the mounted tool carries it).
    fn playbook_line(&self, _language: Language) -> Option<&str> {
        None
    }

    /// The argument of its calls a front end shows first (carried on the `tool_call` event);
    /// `None`: the arguments are shown as they are. The catalog's tools get it from their
    /// catalog entry.
    fn shown_argument(&self) -> Option<ShownArgument> {
        None
    }

    /// The tool reads the turn's images itself (`ToolContext::images`, with a model of its
    /// own that sees them): a turn whose main model cannot see images is told so, and may
    /// still be given images when such a tool is offered.
    fn reads_images(&self) -> bool {
        false
    }

    /// The per-call timeout; a tool with a knob of its own overrides it.
    fn timeout(&self, config: &SolveConfig) -> Duration {
        config.tool_timeout()
    }

    /// Called when a turn that mounts this tool starts. Must return quickly.
    async fn turn_started(&self, _ctx: &ToolContext) {}

    /// Called at most once per model call, as soon as the streamed reply names this tool in a
    /// call (before its arguments are complete), and only while the tool may be called. Lets
    /// the tool start what the call will need (e.g. its interpreter) in the background while
    /// the arguments stream. Must return at once; the call itself may never come (a cut or
    /// invalid reply), and `turn_finished` still follows.
    fn announced(&self, _ctx: &ToolContext) {}

    /// Called when that turn ends, however it ends: release per-turn resources.
    async fn turn_finished(&self, _ctx: &ToolContext) {}

    /// Run with arguments already parsed and validated against `spec().parameters`.
    /// An `Err` becomes an error result, never a crashed turn (see [`ToolError`]).
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// Why a tool call failed, and so what the model is shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// Something the model can act on — bad input, a failed computation, a resource to wait
    /// for: the message is the call's result.
    #[error("{0}")]
    Actionable(String),
    /// The tool is broken or misconfigured: the model is shown a short neutral message; the
    /// detail stays in the call's event and the turn record.
    #[error("{0}")]
    Internal(String),
}

impl ToolError {
    pub fn actionable(message: impl Into<String>) -> Self {
        ToolError::Actionable(message.into())
    }

    pub fn internal(detail: impl Into<String>) -> Self {
        ToolError::Internal(detail.into())
    }

    pub fn message(&self) -> &str {
        match self {
            ToolError::Actionable(m) | ToolError::Internal(m) => m,
        }
    }

    /// The model can act on the error (it is shown as is).
    pub fn is_actionable(&self) -> bool {
        matches!(self, ToolError::Actionable(_))
    }
}

pub type ToolRef = Arc<dyn Tool>;
