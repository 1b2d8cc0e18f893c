//! Telling a work tool early that the streamed reply calls it (`Tool::announced`), so it can
//! start what the call needs while the arguments are still streaming.
//!
//! Native tool calls name their tool in a delta of its own; in the text-tag protocol the
//! name is looked for in the first bytes of a call section the live filter hides. Each tool
//! is told at most once per model call, and only when the request lets the model call tools.

use crate::dispatch::Toolbox;
use crate::model::ChatRequest;
use crate::tool::ToolContext;

pub(super) struct Announcer<'r> {
    toolbox: &'r Toolbox,
    ctx: &'r ToolContext,
    /// False when the request forbids calls (the forced answer): nothing is announced.
    callable: bool,
    /// Tools already told during this model call.
    told: Vec<String>,
}

impl<'r> Announcer<'r> {
    pub(super) fn new(toolbox: &'r Toolbox, ctx: &'r ToolContext, request: &ChatRequest) -> Self {
        Announcer {
            toolbox,
            ctx,
            callable: request.tool_choice.is_auto(),
            told: Vec::new(),
        }
    }

    /// A native call named `name` began streaming.
    pub(super) fn named(&mut self, name: &str) {
        if !self.callable {
            return;
        }
        let Some(mounted) = self.toolbox.resolve(name) else {
            return;
        };
        let Some(tool) = &mounted.tool else {
            return;
        };
        if self.told.iter().any(|t| *t == mounted.spec.name) {
            return;
        }
        self.told.push(mounted.spec.name.clone());
        tool.announced(self.ctx);
    }

    /// The first bytes of a text-tag call section: every work tool named in it as a whole
    /// word is announced.
    pub(super) fn scan(&mut self, head: &str) {
        if !self.callable {
            return;
        }
        let named: Vec<String> = self
            .toolbox
            .work_tool_names()
            .filter(|name| !self.told.iter().any(|t| t == name))
            .filter(|name| names_word(head, name))
            .map(str::to_string)
            .collect();
        for name in named {
            self.named(&name);
        }
    }
}

/// `word` occurs in `text` with no identifier character on either side.
fn names_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

#[cfg(test)]
mod tests {
    use super::names_word;

    #[test]
    fn a_name_counts_only_as_a_whole_word() {
        assert!(names_word(r#"{"name": "exec", "arguments""#, "exec"));
        assert!(names_word("<invoke name=code_execution>", "code_execution"));
        assert!(!names_word(r#"{"name": "exec_code""#, "exec"));
        assert!(!names_word(r#"{"name": "code_execution""#, "exec"));
        assert!(!names_word("", "exec"));
    }
}
