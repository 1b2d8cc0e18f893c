//! What `code_execution` and `exec` share: the per-call timeout, the turn's workspace,
//! artifacts from a workspace diff, and the result text the model reads.

use std::path::PathBuf;
use std::time::Duration;

use deepsolve_core::{Artifact, ToolContext, ToolError};
use deepsolve_sandbox::{Captured, FileChange};
use serde_json::Value;

/// The engine's limit for a code call is the tool's own limit plus this: the interrupt grace,
/// the kill and the final read of the pipes happen inside it, so the tool's timer is the one
/// that fires and the partial output reaches the model.
pub(crate) const ENGINE_GRACE: Duration = Duration::from_secs(5);

/// Bounds of a model-supplied `timeout_s` (the clamp of the `code_timeout_s` knob).
const MIN_TIMEOUT_S: f64 = 1.0;
const MAX_TIMEOUT_S: f64 = 600.0;

/// The call's budget: the model's `timeout_s`, clamped to 1–600 s and never above `max`.
pub(crate) fn call_timeout(args: &Value, max: Duration) -> Duration {
    let wanted = args
        .get("timeout_s")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite())
        .map(|t| Duration::from_secs_f64(t.clamp(MIN_TIMEOUT_S, MAX_TIMEOUT_S)));
    wanted
        .map_or(max, |t| t.min(max))
        .max(Duration::from_secs(1))
}

/// The turn's workspace, or an error: code never runs without one (fail closed).
pub(crate) fn workspace(ctx: &ToolContext, tool: &str) -> Result<PathBuf, ToolError> {
    ctx.workspace.clone().ok_or_else(|| {
        ToolError::internal(format!(
            "{tool} is unavailable: this turn has no workspace to run code in"
        ))
    })
}

pub(crate) fn artifacts(changes: Vec<FileChange>) -> Vec<Artifact> {
    changes
        .into_iter()
        .map(|c| Artifact {
            path: c.path,
            size: c.size,
            mime: c.mime,
        })
        .collect()
}

/// The result text, built from labelled sections; empty sections are left out.
#[derive(Default)]
pub(crate) struct Report {
    text: String,
}

impl Report {
    pub(crate) fn line(&mut self, line: impl AsRef<str>) {
        self.text.push_str(line.as_ref());
        self.text.push('\n');
    }

    pub(crate) fn section(&mut self, title: &str, body: &str) {
        if body.is_empty() {
            return;
        }
        self.text.push_str(&format!("[{title}]\n"));
        self.text.push_str(body);
        if !body.ends_with('\n') {
            self.text.push('\n');
        }
    }

    pub(crate) fn output(&mut self, title: &str, captured: &Captured) {
        self.section(title, &captured.text);
    }

    pub(crate) fn files(&mut self, artifacts: &[Artifact]) {
        let listing: Vec<String> = artifacts
            .iter()
            .map(|a| format!("{} ({}, {})", shown(&a.path), a.mime, human_size(a.size)))
            .collect();
        self.section("files written", &listing.join("\n"));
    }

    pub(crate) fn finish(self) -> String {
        let text = self.text.trim_end().to_string();
        if text.is_empty() {
            "(no output)".into()
        } else {
            text
        }
    }
}

/// A file name as the model should read it: quoted and escaped when it holds control
/// characters (the code that named it is not trusted), plain otherwise.
fn shown(path: &str) -> String {
    if path.chars().any(char::is_control) {
        format!("{path:?}")
    } else {
        path.to_string()
    }
}

pub fn human_size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{:.1} MiB", b / KIB / KIB)
    }
}

pub(crate) fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if (s - s.round()).abs() < 0.05 {
        format!("{}s", s.round() as u64)
    } else {
        format!("{s:.1}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timeouts_are_clamped_and_capped() {
        let max = Duration::from_secs(30);
        assert_eq!(call_timeout(&json!({}), max), max);
        assert_eq!(
            call_timeout(&json!({"timeout_s": 5}), max),
            Duration::from_secs(5)
        );
        assert_eq!(
            call_timeout(&json!({"timeout_s": 0}), max),
            Duration::from_secs(1)
        );
        assert_eq!(
            call_timeout(&json!({"timeout_s": -3}), max),
            Duration::from_secs(1)
        );
        assert_eq!(call_timeout(&json!({"timeout_s": 9999}), max), max);
        let long = Duration::from_secs(900);
        assert_eq!(
            call_timeout(&json!({"timeout_s": 9999}), long),
            Duration::from_secs(600)
        );
        assert_eq!(call_timeout(&json!({"timeout_s": "soon"}), max), max);
    }

    #[test]
    fn reports_skip_empty_sections() {
        let mut r = Report::default();
        r.section("stdout", "");
        assert_eq!(r.finish(), "(no output)");
        let mut r = Report::default();
        r.section("stdout", "4");
        r.section("value", "x**2");
        assert_eq!(r.finish(), "[stdout]\n4\n[value]\nx**2");
        assert_eq!(human_size(2048), "2.0 KiB");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5s");
        assert_eq!(seconds(Duration::from_secs(30)), "30s");
    }
}
