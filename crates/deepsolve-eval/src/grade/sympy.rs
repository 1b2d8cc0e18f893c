//! Symbolic equivalence by sympy, run in the project's sandbox: model output reaches
//! `parse_expr` (which evaluates Python), so it never runs outside isolation.

use std::ffi::OsString;
use std::time::Duration;

use async_trait::async_trait;
use deepsolve_sandbox::{ExitKind, Sandbox, SandboxConfig, SandboxError, SandboxMode};
use tokio_util::sync::CancellationToken;

/// What sympy is asked: are two expressions equal, or two equations the same (their sides'
/// differences equal up to sign)?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Expression,
    Equation,
}

/// Two expressions in sympy's syntax (as `expr.rs` prints them) with their free symbols.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolicQuery {
    pub expected: String,
    pub answer: String,
    pub symbols: Vec<String>,
    pub relation: Relation,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SymbolicError {
    #[error("sympy took longer than {}s", .0.as_secs())]
    Timeout(Duration),
    #[error("sympy failed: {0}")]
    Failed(String),
    #[error("the sandbox could not run sympy: {0}")]
    Sandbox(String),
}

/// Decides symbolic equivalence. Behind a trait so a grader can run without a sandbox (then
/// such answers are judged `unverified`) and tests can substitute their own.
#[async_trait]
pub trait SymbolicJudge: Send + Sync {
    async fn equivalent(&self, query: &SymbolicQuery) -> Result<bool, SymbolicError>;
}

/// The script sympy runs: argv = expected, answer, symbols (comma-separated), relation.
const SCRIPT: &str = r#"
import sys
from sympy import Symbol, simplify
from sympy.parsing.sympy_parser import parse_expr, standard_transformations, rationalize
names = [n for n in sys.argv[3].split(",") if n]
local = {n: Symbol(n) for n in names}
T = standard_transformations + (rationalize,)
a = parse_expr(sys.argv[1], local_dict=local, transformations=T)
b = parse_expr(sys.argv[2], local_dict=local, transformations=T)
def same(x, y):
    try:
        if simplify(x - y) == 0:
            return True
    except Exception:
        pass
    try:
        return bool(x.equals(y))
    except Exception:
        return False
ok = same(a, b) or (sys.argv[4] == "equation" and same(a, -b))
print("EQUAL" if ok else "DIFFERENT")
"#;

/// sympy in a bubblewrap sandbox (the system Python with python3-sympy).
pub struct SandboxSympy {
    sandbox: Sandbox,
    timeout: Duration,
}

/// A sympy check's time limit unless the caller sets one.
pub const DEFAULT_SYMPY_TIMEOUT: Duration = Duration::from_secs(20);

impl SandboxSympy {
    pub fn new(sandbox: Sandbox, timeout: Duration) -> Self {
        SandboxSympy { sandbox, timeout }
    }

    /// Find a working bubblewrap sandbox with the default Python (`/usr/bin/python3`); the
    /// error says why there is none (then grade without sympy).
    pub async fn detect(timeout: Duration) -> Result<Self, SandboxError> {
        let sandbox = Sandbox::detect(SandboxConfig::with_mode(SandboxMode::Bwrap)).await?;
        Ok(Self::new(sandbox, timeout))
    }
}

#[async_trait]
impl SymbolicJudge for SandboxSympy {
    async fn equivalent(&self, query: &SymbolicQuery) -> Result<bool, SymbolicError> {
        let argv: Vec<OsString> = vec![
            self.sandbox.config().python.clone().into_os_string(),
            "-I".into(),
            "-B".into(),
            "-c".into(),
            SCRIPT.into(),
            query.expected.clone().into(),
            query.answer.clone().into(),
            query.symbols.join(",").into(),
            match query.relation {
                Relation::Expression => "expression".into(),
                Relation::Equation => "equation".into(),
            },
        ];
        let outcome = self
            .sandbox
            .run_argv(argv, None, self.timeout, &CancellationToken::new())
            .await
            .map_err(|e| SymbolicError::Sandbox(e.to_string()))?;
        match outcome.exit {
            ExitKind::TimedOut => return Err(SymbolicError::Timeout(self.timeout)),
            ExitKind::Exited(0) => {}
            _ => {
                let tail: String = outcome
                    .stderr
                    .text
                    .lines()
                    .last()
                    .unwrap_or(outcome.detail.as_str())
                    .chars()
                    .take(300)
                    .collect();
                return Err(SymbolicError::Failed(tail));
            }
        }
        match outcome.stdout.text.trim() {
            "EQUAL" => Ok(true),
            "DIFFERENT" => Ok(false),
            other => Err(SymbolicError::Failed(format!(
                "unexpected output {:?}",
                other.chars().take(200).collect::<String>()
            ))),
        }
    }
}
