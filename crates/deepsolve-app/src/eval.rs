//! The `deepsolve` mode of an evaluation: each problem a recorded turn through [`crate::life`]
//! — a new session per problem, in the problem's language, with the configured tools — stored
//! like any other turn, so `deepsolve show TURN` and the web UI open its trace.

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::SolveConfig;
use deepsolve_eval::{Attempt, Problem, SolveError, Solver};
use deepsolve_protocol::Protocol;
use tokio_util::sync::CancellationToken;

use crate::App;
use crate::life::{Recorder, SessionChoice, TurnPlan, TurnRun, hold_workspace_for};
use crate::turn::default_workspace_root;

/// Runs each problem as a recorded turn of `user` on `app`.
pub struct TurnSolver {
    app: Arc<App>,
    recorder: Recorder,
    user: String,
    tools: Vec<String>,
    config: SolveConfig,
    context_window: u64,
    protocol: Protocol,
}

impl TurnSolver {
    /// Turns of `user` recorded by `recorder` on `app`, offering `tools` (already checked:
    /// `App::tools_for_turn_with`), with these solve knobs, context window and protocol.
    pub fn new(app: Arc<App>, recorder: Recorder, user: impl Into<String>) -> TurnSolver {
        TurnSolver {
            app,
            recorder,
            user: user.into(),
            tools: Vec::new(),
            config: SolveConfig::default(),
            context_window: deepsolve_core::DEFAULT_CONTEXT_WINDOW,
            protocol: Protocol::default(),
        }
    }

    pub fn tools(mut self, tools: Vec<String>) -> TurnSolver {
        self.tools = tools;
        self
    }

    pub fn config(mut self, config: SolveConfig, context_window: u64) -> TurnSolver {
        self.config = config;
        self.context_window = context_window;
        self
    }

    pub fn protocol(mut self, protocol: Protocol) -> TurnSolver {
        self.protocol = protocol;
        self
    }
}

/// A failure before the turn ran, as the problem's recorded error.
fn failed(kind: &str, error: impl std::fmt::Display) -> SolveError {
    SolveError::Failed {
        kind: kind.to_string(),
        message: error.to_string(),
    }
}

#[async_trait]
impl Solver for TurnSolver {
    async fn solve(
        &self,
        problem: &Problem,
        cancel: &CancellationToken,
    ) -> Result<Attempt, SolveError> {
        if cancel.is_cancelled() {
            return Err(SolveError::Cancelled);
        }
        let plan = TurnPlan::new(
            problem.question.clone(),
            problem.language,
            self.tools.clone(),
            self.config.clone(),
            self.context_window,
        );
        let held = hold_workspace_for(
            &self.app,
            &plan.tools,
            &plan.turn_id,
            default_workspace_root,
        )
        .map_err(|e| failed("workspace", e))?;
        let mut spec = self
            .recorder
            .record(&self.user, SessionChoice::new(), plan)
            .await
            .map_err(|e| failed("store", e))?;
        spec.protocol = self.protocol;
        // A child token: the turn is recorded `cancelled` when the run is, and a turn's own
        // end never cancels the run.
        let run = TurnRun::new(&self.app, spec)
            .workspace(held)
            .cancel(cancel.child_token());
        let outcome = self
            .recorder
            .run(run)
            .await
            .map_err(|e| failed("turn_not_started", e))?;
        Attempt::from_turn(&outcome)
    }
}
