//! Files a tool call produced, stored as the call ends: a front end that keeps artifacts (the
//! server) gives the app an [`ArtifactRegistry`], and every tool is wrapped so its reported
//! artifacts are handed to it before the engine emits the call's `tool_result` — the event
//! then names where each stored copy is (`Artifact::id`, `url`), and a page can show a figure
//! while the turn still runs.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::{
    Artifact, Language, ShownArgument, SolveConfig, Tool, ToolContext, ToolError, ToolOutput,
    ToolRef, ToolSpec,
};
use serde_json::Value;

/// Whether `content`, read back from the workspace, is a figure deepsolve drew itself: the
/// tool that wrote it recorded the hash of its bytes (`Artifact::rendered_sha256`) and these
/// bytes still have it. Code in the sandbox can write any file, or overwrite ours between the
/// write and the read; then the file is treated like any other.
pub fn is_rendered(artifact: &Artifact, content: &[u8]) -> bool {
    artifact
        .rendered_sha256
        .as_deref()
        .is_some_and(|expected| expected == deepsolve_protocol::sha256_hex(content))
}

/// Keeps the files tool calls report.
#[async_trait]
pub trait ArtifactRegistry: Send + Sync {
    /// Store what `artifacts` name in the call's workspace (`ctx.workspace`) and fill in each
    /// stored one's `id` and `url`; a file that cannot be stored keeps neither.
    async fn register(&self, ctx: &ToolContext, artifacts: &mut [Artifact]);
}

/// `tool`, whose reported artifacts go to `registry` as each call ends.
pub(crate) fn registering(tool: ToolRef, registry: Arc<dyn ArtifactRegistry>) -> ToolRef {
    Arc::new(Registering { tool, registry })
}

struct Registering {
    tool: ToolRef,
    registry: Arc<dyn ArtifactRegistry>,
}

#[async_trait]
impl Tool for Registering {
    fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    fn playbook_line(&self, language: Language) -> Option<&str> {
        self.tool.playbook_line(language)
    }

    fn shown_argument(&self) -> Option<ShownArgument> {
        self.tool.shown_argument()
    }

    fn reads_images(&self) -> bool {
        self.tool.reads_images()
    }

    fn timeout(&self, config: &SolveConfig) -> Duration {
        self.tool.timeout(config)
    }

    async fn turn_started(&self, ctx: &ToolContext) {
        self.tool.turn_started(ctx).await;
    }

    fn announced(&self, ctx: &ToolContext) {
        self.tool.announced(ctx);
    }

    async fn turn_finished(&self, ctx: &ToolContext) {
        self.tool.turn_finished(ctx).await;
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut output = self.tool.run(args, ctx).await?;
        if !output.artifacts.is_empty() {
            self.registry.register(ctx, &mut output.artifacts).await;
        }
        Ok(output)
    }
}
