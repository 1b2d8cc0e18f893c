//! Files a tool call produced, stored as the call ends: a front end that keeps artifacts (the
//! server) gives the app an [`ArtifactRegistry`], and every tool is wrapped so its reported
//! artifacts are handed to it before the engine emits the call's `tool_result` — the event
//! then names where each stored copy is (`Artifact::id`, `url`), and a page can show a figure
//! while the turn still runs. [`ArtifactStore`] is that registry over the store, for every
//! front end that records its turns; what it could not store as a call ended is copied once
//! more at the turn's end ([`ArtifactStore::store_leftovers`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::{
    Artifact, Language, ShownArgument, SolveConfig, Tool, ToolContext, ToolError, ToolOutput,
    ToolRef, ToolSpec,
};
use deepsolve_protocol::TurnOutcome;
use deepsolve_store::{ArtifactMeta, ArtifactOrigin, NewArtifact, Store};
use serde_json::Value;

/// The largest artifact copied into the store, unless configured otherwise (the server's
/// `max_artifact_bytes`).
pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 20 * 1024 * 1024;

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

/// Stores a call's artifacts as the call ends, before its `tool_result` event, which then
/// carries each stored copy's `id` and `url` (the web UI shows a figure while the turn runs).
pub struct ArtifactStore {
    store: Store,
    max_bytes: u64,
}

impl ArtifactStore {
    /// `max_bytes`: the largest file copied ([`DEFAULT_MAX_ARTIFACT_BYTES`] unless configured).
    pub fn new(store: Store, max_bytes: u64) -> Arc<Self> {
        Arc::new(ArtifactStore { store, max_bytes })
    }

    /// Copy the files a turn produced into the store that were not stored as their call
    /// ended, so any replica can serve them. A file reported by several calls and never
    /// stored live is stored once, as it was at the end.
    pub async fn store_leftovers(
        &self,
        turn_id: &str,
        user_id: &str,
        workspace: &Path,
        outcome: &TurnOutcome,
    ) {
        let stored_live: HashSet<&str> = (outcome.artifacts.iter())
            .filter(|a| a.id.is_some())
            .map(|a| a.path.as_str())
            .collect();
        let mut seen = HashSet::new();
        let owner = Owner {
            turn_id,
            user_id,
            workspace,
        };
        for artifact in outcome.artifacts.iter().rev() {
            if stored_live.contains(artifact.path.as_str()) || !seen.insert(artifact.path.as_str())
            {
                continue;
            }
            store_one(&self.store, self.max_bytes, &owner, artifact).await;
        }
    }
}

#[async_trait]
impl ArtifactRegistry for ArtifactStore {
    async fn register(&self, ctx: &ToolContext, artifacts: &mut [Artifact]) {
        let (Some(workspace), Some(user_id)) = (&ctx.workspace, &ctx.user_id) else {
            return;
        };
        let owner = Owner {
            turn_id: &ctx.turn_id,
            user_id,
            workspace,
        };
        for artifact in artifacts.iter_mut() {
            if let Some(meta) = store_one(&self.store, self.max_bytes, &owner, artifact).await {
                artifact.url = Some(format!("/api/v1/artifacts/{}", meta.id));
                artifact.id = Some(meta.id);
            }
        }
    }
}

/// Whose file an artifact is.
struct Owner<'a> {
    turn_id: &'a str,
    user_id: &'a str,
    workspace: &'a Path,
}

/// Copy one reported file into the store. Paths are resolved inside the workspace only: a
/// tool (or a model steering one) cannot make the server read `/etc/passwd` by naming it as
/// an artifact. `None` (logged): outside, too large, unreadable, or not stored.
async fn store_one(
    store: &Store,
    max_bytes: u64,
    owner: &Owner<'_>,
    artifact: &Artifact,
) -> Option<ArtifactMeta> {
    let turn_id = owner.turn_id;
    let Some(path) = inside(owner.workspace, &artifact.path) else {
        tracing::warn!(turn_id, path = %artifact.path, "artifact outside the workspace skipped");
        return None;
    };
    let content = match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.len() <= max_bytes => tokio::fs::read(&path).await,
        Ok(_) => {
            tracing::warn!(turn_id, path = %artifact.path, "artifact too large; skipped");
            return None;
        }
        Err(e) => Err(e),
    };
    let content = match content {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(turn_id, path = %artifact.path, error = %e, "artifact unreadable");
            return None;
        }
    };
    let name = Path::new(&artifact.path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "artifact".into());
    let new = NewArtifact {
        turn_id: turn_id.to_string(),
        user_id: owner.user_id.to_string(),
        name,
        mime: artifact.mime.clone(),
        origin: origin(artifact, &content),
        content,
    };
    match store.put_artifact(new).await {
        Ok(meta) => Some(meta),
        Err(e) => {
            tracing::error!(turn_id, error = %e, "artifact not stored");
            None
        }
    }
}

/// A file is ours (drawn by deepsolve, shown inline) only when its tool recorded the hash of
/// what it wrote and the bytes read back still have it ([`is_rendered`]).
fn origin(artifact: &Artifact, content: &[u8]) -> ArtifactOrigin {
    if is_rendered(artifact, content) {
        ArtifactOrigin::Rendered
    } else {
        ArtifactOrigin::Workspace
    }
}

/// `rel` resolved under `root`, or `None` if it would leave it (`..`, absolute paths,
/// symlinks pointing out).
fn inside(root: &Path, rel: &str) -> Option<PathBuf> {
    let root = root.canonicalize().ok()?;
    let candidate = root.join(rel.trim_start_matches('/'));
    let resolved = candidate.canonicalize().ok()?;
    resolved.starts_with(&root).then_some(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_paths_cannot_leave_the_workspace() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("ok.txt"), "x").expect("write");
        assert!(inside(dir.path(), "ok.txt").is_some());
        assert!(inside(dir.path(), "/ok.txt").is_some());
        assert!(inside(dir.path(), "../../etc/passwd").is_none());
        assert!(inside(dir.path(), "missing.txt").is_none());
    }
}
