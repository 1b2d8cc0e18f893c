//! A tool as the catalog mounts it: the tool its factory built, answering what its catalog
//! entry says about it (its playbook line, the argument a front end shows first) from the
//! entry, so no tool module declares them a second time.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_core::{
    Language, ShownArgument, SolveConfig, Tool, ToolContext, ToolError, ToolOutput, ToolRef,
    ToolSpec,
};
use serde_json::Value;

use crate::toolset::{PlaybookLine, Shown, ToolEntry};

/// `tool`, as `entry` describes it.
pub(crate) fn cataloged(tool: ToolRef, entry: &ToolEntry) -> ToolRef {
    Arc::new(Cataloged {
        tool,
        playbook: entry.playbook,
        shown: entry.shows,
    })
}

struct Cataloged {
    tool: ToolRef,
    playbook: PlaybookLine,
    shown: Option<Shown>,
}

#[async_trait]
impl Tool for Cataloged {
    fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    fn playbook_line(&self, language: Language) -> Option<&str> {
        Some(self.playbook.get(language))
    }

    fn shown_argument(&self) -> Option<ShownArgument> {
        self.shown.map(Shown::to_wire)
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
        self.tool.run(args, ctx).await
    }
}
