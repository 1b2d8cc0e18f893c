//! What `code_execution` and `exec` share: the per-call timeout, the turn's workspace,
//! artifacts from a workspace diff, and the result text the model reads.

use std::path::PathBuf;
use std::time::Duration;

use deepsolve_core::{Artifact, Language, ToolContext, ToolError};
use deepsolve_sandbox::{Captured, FileChange, Stopped};
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
            id: None,
            url: None,
            rendered_sha256: None,
        })
        .collect()
}

/// What a budget's stop ended, as the result says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// An `exec` command and everything it started.
    Command,
    /// The persistent interpreter, with the names defined so far.
    Interpreter,
}

/// The status line of a call a per-turn budget stopped, in the turn's language: which limit,
/// what was killed, and what to do differently.
pub(crate) fn stopped_line(why: &Stopped, ended: Ended, language: Language) -> String {
    let (what, advice) = match language {
        Language::En => stopped_en(why),
        Language::Zh => stopped_zh(why),
    };
    match (language, ended) {
        (Language::En, Ended::Command) => format!(
            "[status] stopped: {what}. The command and everything it started were killed. {advice} Output so far is below."
        ),
        (Language::En, Ended::Interpreter) => format!(
            "[status] stopped: {what}. The interpreter was killed, so names defined in earlier calls are gone. {advice} Output so far is below."
        ),
        (Language::Zh, Ended::Command) => {
            format!(
                "[status] 已停止：{what}。该命令及其启动的所有进程已被终止。{advice}以下是此前的输出。"
            )
        }
        (Language::Zh, Ended::Interpreter) => format!(
            "[status] 已停止：{what}。解释器已被终止，之前调用中定义的名称都已丢失。{advice}以下是此前的输出。"
        ),
    }
}

fn stopped_en(why: &Stopped) -> (String, &'static str) {
    const CLEAN_UP: &str =
        "The files written so far are kept; delete what is not needed before writing more.";
    match *why {
        Stopped::MemoryBudget { limit_mb, used_mb } => (
            format!(
                "the turn's code used more memory than its budget ({used_mb} MiB, all its processes together; the budget is {limit_mb} MiB)"
            ),
            "Use less memory at once: smaller arrays or chunks, fewer processes, `del` what is no longer needed.",
        ),
        Stopped::ProcessBudget { limit } => (
            format!("the turn's code reached its limit of {limit} processes and threads at once"),
            "Start fewer processes or threads at once.",
        ),
        Stopped::WorkspaceBytes { limit_mb, used_mb } => (
            format!("the workspace grew past its quota of {limit_mb} MiB ({used_mb} MiB)"),
            CLEAN_UP,
        ),
        Stopped::WorkspaceFiles { limit, found } => (
            format!("the workspace grew past its limit of {limit} files and directories ({found})"),
            CLEAN_UP,
        ),
        Stopped::WorkspaceDepth { limit } => (
            format!("the workspace's directories are nested deeper than {limit} levels"),
            "Remove or flatten the deeply nested directories.",
        ),
    }
}

fn stopped_zh(why: &Stopped) -> (String, &'static str) {
    const CLEAN_UP: &str = "已写入的文件会保留；请先删除不需要的文件再写入。";
    match *why {
        Stopped::MemoryBudget { limit_mb, used_mb } => (
            format!(
                "本轮代码占用的内存超出预算（所有进程合计 {used_mb} MiB，预算为 {limit_mb} MiB）"
            ),
            "请减少同时占用的内存：用更小的数组或分块处理、更少的进程，并 del 不再需要的对象。",
        ),
        Stopped::ProcessBudget { limit } => (
            format!("本轮代码同时运行的进程和线程数达到上限 {limit}"),
            "请减少同时启动的进程或线程。",
        ),
        Stopped::WorkspaceBytes { limit_mb, used_mb } => (
            format!("工作区超出了 {limit_mb} MiB 的配额（现为 {used_mb} MiB）"),
            CLEAN_UP,
        ),
        Stopped::WorkspaceFiles { limit, found } => (
            format!("工作区的文件和目录数超出上限 {limit}（现为 {found}）"),
            CLEAN_UP,
        ),
        Stopped::WorkspaceDepth { limit } => (
            format!("工作区的目录嵌套超过 {limit} 层"),
            "请删除或展平过深的目录。",
        ),
    }
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
    fn every_budget_stop_is_named_in_both_languages() {
        let all = [
            Stopped::MemoryBudget {
                limit_mb: 256,
                used_mb: 300,
            },
            Stopped::ProcessBudget { limit: 64 },
            Stopped::WorkspaceBytes {
                limit_mb: 64,
                used_mb: 70,
            },
            Stopped::WorkspaceFiles {
                limit: 10_000,
                found: 10_300,
            },
            Stopped::WorkspaceDepth { limit: 64 },
        ];
        for why in all {
            for ended in [Ended::Command, Ended::Interpreter] {
                let en = stopped_line(&why, ended, Language::En);
                assert!(en.starts_with("[status] stopped: "), "{en}");
                let zh = stopped_line(&why, ended, Language::Zh);
                assert!(zh.starts_with("[status] 已停止："), "{zh}");
                // The Chinese line carries no English words (numbers and `del` aside).
                let english = zh
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .filter(|w| w.len() > 3 && *w != "status")
                    .collect::<Vec<_>>();
                assert!(english.is_empty(), "{zh}: {english:?}");
            }
        }
        let memory = stopped_line(&all[0], Ended::Interpreter, Language::En);
        assert!(
            memory.contains("300 MiB")
                && memory.contains("256 MiB")
                && memory.contains("names defined in earlier calls are gone")
        );
        let files = stopped_line(&all[3], Ended::Command, Language::Zh);
        assert!(files.contains("10000") && files.contains("10300") && files.contains("该命令"));
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
