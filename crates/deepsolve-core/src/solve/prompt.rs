//! The solve playbook (system prompt). It names only mounted tools.

use serde::{Deserialize, Serialize};

use super::spine::is_solve_tool;
use crate::texts::{Text, Texts};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    #[default]
    En,
    Zh,
}

impl Language {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "en" | "english" => Some(Language::En),
            "zh" | "zh-cn" | "chinese" | "中文" => Some(Language::Zh),
            _ => None,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Zh => "zh",
        }
    }
}

/// What each known work tool is for, per language.
fn tool_line(name: &str, lang: Language) -> Option<&'static str> {
    let line = match (name, lang) {
        ("code_execution", Language::En) => {
            "`code_execution`: computation, symbolic algebra, plots, numerical checks"
        }
        ("code_execution", Language::Zh) => "`code_execution`：计算、符号运算、作图、数值验算",
        ("exec", Language::En) => {
            "`exec`: produce files (a worked-solution PDF, a chart, a spreadsheet)"
        }
        ("exec", Language::Zh) => "`exec`：生成文件（解题 PDF、图表、表格）",
        ("rag", Language::En) => "`rag`: search the attached learning material; cite chunks as [n]",
        ("rag", Language::Zh) => "`rag`：检索附带的学习材料，引用时标注 [n]",
        ("read_source", Language::En) => "`read_source`: read an attached document",
        ("read_source", Language::Zh) => "`read_source`：阅读附带的文档",
        ("web_search", Language::En) => "`web_search`: check facts you are unsure of",
        ("web_search", Language::Zh) => "`web_search`：核查不确定的事实",
        ("web_fetch", Language::En) => "`web_fetch`: read a web page found by search",
        ("web_fetch", Language::Zh) => "`web_fetch`：阅读搜索到的网页",
        ("reason", Language::En) => "`reason`: a hard sub-derivation, worked carefully",
        ("reason", Language::Zh) => "`reason`：完成一段困难的子推导",
        ("geogebra_analysis", Language::En) => {
            "`geogebra_analysis`: rebuild the figure of a problem with an image, then solve from it"
        }
        ("geogebra_analysis", Language::Zh) => {
            "`geogebra_analysis`：把带图题目的图形还原成 GeoGebra 图形，再基于图形求解"
        }
        _ => return None,
    };
    Some(line)
}

/// The playbook for the mounted tools, in the texts' language. Unknown tools are listed by
/// name with their description.
pub(crate) fn playbook(texts: &Texts, mounted: &[(&str, &str)]) -> String {
    let lines: Vec<String> = mounted
        .iter()
        .filter(|(name, _)| !is_solve_tool(name))
        .map(|(name, description)| {
            let text = tool_line(name, texts.language()).map_or_else(
                || {
                    texts.render(
                        Text::PlaybookToolLine,
                        &[("name", name), ("description", description)],
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

    fn playbook(language: Language, mounted: &[(&str, &str)]) -> String {
        super::playbook(&Texts::builtin(language), mounted)
    }

    #[test]
    fn names_only_mounted_tools() {
        let p = playbook(
            Language::En,
            &[("code_execution", "run python"), ("solve_plan", "")],
        );
        assert!(p.contains("`code_execution`"));
        assert!(!p.contains("`web_search`"));
        assert!(!p.contains("`rag`"));
        assert!(p.contains("solve_plan"));
    }

    #[test]
    fn chinese_playbook_has_the_same_contract() {
        let p = playbook(Language::Zh, &[("reason", "")]);
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
    fn no_tools_says_so() {
        assert!(playbook(Language::En, &[]).contains("no work tools"));
    }
}
