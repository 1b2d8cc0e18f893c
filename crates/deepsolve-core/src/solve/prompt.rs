//! The solve playbook (system prompt), in English and Chinese. It names only mounted tools.

use super::spine::is_solve_tool;

/// The turn's language is a wire type (the stored turn spec, the API).
pub use deepsolve_protocol::Language;

const EN: &str = include_str!("prompts/en.md");
const ZH: &str = include_str!("prompts/zh.md");

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

/// The playbook for the mounted tools. Unknown tools are listed by name with their description.
pub fn playbook(lang: Language, mounted: &[(&str, &str)]) -> String {
    let lines: Vec<String> = mounted
        .iter()
        .filter(|(name, _)| !is_solve_tool(name))
        .map(|(name, description)| {
            let text = tool_line(name, lang)
                .map(str::to_string)
                .unwrap_or_else(|| format!("`{name}`: {description}"));
            format!("   - {text}")
        })
        .collect();
    let tool_lines = if lines.is_empty() {
        match lang {
            Language::En => "   - no work tools are available in this turn: reason it out carefully in your own words".to_string(),
            Language::Zh => "   - 本回合没有可用的工作工具：请自己仔细推理".to_string(),
        }
    } else {
        lines.join("\n")
    };
    let template = match lang {
        Language::En => EN,
        Language::Zh => ZH,
    };
    template.replace("{{tool_lines}}", &tool_lines)
}

#[cfg(test)]
mod tests {
    use super::*;

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
