//! The solve playbook (system prompt). It names only mounted tools.

use super::spine::is_solve_tool;
use crate::texts::{TOOLS_MARKER, Text, Texts, placeholders};

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
/// listed by name with its description. The lines go where the playbook says (`{tool_lines}`,
/// or `{tools}` in an operator's playbook); one that says nowhere gets them appended, so a
/// playbook always names exactly the mounted tools.
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
    let template = texts.get(Text::Playbook);
    let placed = placeholders(template)
        .iter()
        .any(|p| *p == "tool_lines" || *p == TOOLS_MARKER);
    let body = texts.render(
        Text::Playbook,
        &[("tool_lines", &tool_lines), (TOOLS_MARKER, &tool_lines)],
    );
    if placed {
        return body;
    }
    let appended = texts.render(Text::PlaybookToolsAppended, &[("tool_lines", &tool_lines)]);
    format!("{}\n\n{appended}", body.trim_end())
}

/// The playbook a turn offering `work_tools` starts under (each listed by name and
/// description), in the texts' language: for a caller that asks a model what a solve asks of
/// it without running one (the endpoint probe).
pub fn playbook_for(texts: &Texts, work_tools: &[crate::model::ToolSpec]) -> String {
    let mounted: Vec<ToolLine<'_>> = work_tools
        .iter()
        .map(|spec| ToolLine {
            name: &spec.name,
            description: &spec.description,
            line: None,
        })
        .collect();
    playbook(texts, &mounted)
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
    fn an_operator_s_playbook_gets_the_tool_lines_at_its_marker_or_at_the_end() {
        let mounted = [tool("reason", "think hard")];
        let texts = |body: &str| Texts::with_overrides(Language::En, [("playbook", body)]).unwrap();
        let placed = super::playbook(&texts("Tools:\n{tools}\nThen finish."), &mounted);
        assert_eq!(placed, "Tools:\n   - `reason`: think hard\nThen finish.");
        let appended = super::playbook(&texts("Be brief.\n"), &mounted);
        assert_eq!(
            appended,
            "Be brief.\n\nThe tools you can use in this turn:\n   - `reason`: think hard"
        );
        let zh = Texts::with_overrides(Language::Zh, [("playbook", "简洁。")]).unwrap();
        let appended = super::playbook(&zh, &[]);
        assert!(
            appended.starts_with("简洁。\n\n本轮可用的工具：\n   - "),
            "{appended}"
        );
    }

    #[test]
    fn no_tools_says_so() {
        assert!(playbook(Language::En, &[]).contains("no work tools"));
    }
}
