//! The solve playbook (system prompt). It names only mounted tools.

use super::spine::is_solve_tool;
use crate::texts::{Text, Texts};

/// The turn's language is a wire type (the stored turn spec, the API).
pub use deepsolve_protocol::Language;

/// A mounted work tool as the playbook lists it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolLine<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// The tool's own line in the turn's language ([`crate::Tool::playbook_line`]).
    pub line: Option<&'a str>,
}

/// The playbook for the mounted tools, in the texts' language. A tool without its own line is
/// listed by name with its description.
pub(crate) fn playbook(texts: &Texts, mounted: &[ToolLine<'_>]) -> String {
    let lines: Vec<String> = mounted
        .iter()
        .filter(|tool| !is_solve_tool(tool.name))
        .map(|tool| {
            let text = tool.line.map_or_else(
                || {
                    texts.render(
                        Text::PlaybookToolLine,
                        &[("name", &tool.name), ("description", &tool.description)],
                    )
                },
                str::to_string,
            );
            format!("   - {text}")
        })
        .collect();
    let tool_lines = if lines.is_empty() {
        format!("   - {}", texts.get(Text::PlaybookNoWorkTools))
    } else {
        lines.join("\n")
    };
    texts.render(Text::Playbook, &[("tool_lines", &tool_lines)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool<'a>(name: &'a str, description: &'a str) -> ToolLine<'a> {
        ToolLine {
            name,
            description,
            line: None,
        }
    }

    fn playbook(language: Language, mounted: &[ToolLine<'_>]) -> String {
        super::playbook(&Texts::builtin(language), mounted)
    }

    #[test]
    fn names_only_mounted_tools() {
        let p = playbook(
            Language::En,
            &[tool("code_execution", "run python"), tool("solve_plan", "")],
        );
        assert!(p.contains("`code_execution`"));
        assert!(!p.contains("`web_search`"));
        assert!(!p.contains("`rag`"));
        assert!(p.contains("solve_plan"));
    }

    #[test]
    fn chinese_playbook_has_the_same_contract() {
        let p = playbook(Language::Zh, &[tool("reason", "")]);
        for name in [
            "solve_plan",
            "solve_finish_step",
            "solve_replan",
            "`reason`",
        ] {
            assert!(p.contains(name), "{name} missing");
        }
        assert!(!p.contains("code_execution"));
    }

    #[test]
    fn a_tool_s_own_line_replaces_its_description() {
        let own = ToolLine {
            line: Some("`exec`：生成文件"),
            ..tool("exec", "Run a shell command.")
        };
        let p = playbook(Language::Zh, &[own]);
        assert!(p.contains("   - `exec`：生成文件"), "{p}");
        assert!(!p.contains("Run a shell command."), "{p}");
    }

    #[test]
    fn no_tools_says_so() {
        assert!(playbook(Language::En, &[]).contains("no work tools"));
    }
}
