//! Every text the model reads, per language. One file per text under `prompts/<lang>/`,
//! named by what it is, embedded at build time; `{name}` placeholders are filled by one small
//! renderer ([`fill`]). A file's final newline is not part of its text.
//!
//! The `[deepsolve:…]` markers, tool names and JSON field names are not texts: they stay
//! language-neutral, written by the code around the texts.
//!
//! An operator may replace any text of a language by name ([`Texts::with_overrides`]; the
//! settings say where the replacements come from). A replacement is text: a `{name}` it
//! writes that its text does not fill stays as written (so LaTeX such as `\frac{a}{b}` is
//! safe), and one it leaves out is simply not said.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::{Display, Write as _};
use std::sync::{Arc, LazyLock};

use crate::solve::Language;

macro_rules! catalog {
    ($($id:ident => $file:literal,)*) => {
        /// One model-facing text, named by its file (`prompts/<lang>/<name>.md`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Text {
            $($id,)*
        }

        impl Text {
            /// Every text, in catalog order.
            pub const ALL: &'static [Text] = &[$(Text::$id,)*];

            /// The stable file name (without `.md`): the text's name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Text::$id => $file,)*
                }
            }

            /// The text called `name`.
            pub fn by_name(name: &str) -> Option<Text> {
                Text::ALL.iter().copied().find(|t| t.name() == name)
            }
        }

        const EN: &[&str] = &[$(include_str!(concat!("../prompts/en/", $file, ".md")),)*];
        const ZH: &[&str] = &[$(include_str!(concat!("../prompts/zh/", $file, ".md")),)*];
    };
}

catalog! {
    Playbook => "playbook",
    DraftSystem => "draft_system",
    PlaybookToolLine => "playbook_tool_line",
    PlaybookNoWorkTools => "playbook_no_work_tools",
    PlaybookToolsAppended => "playbook_tools_appended",
    MaterialHeader => "material_header",
    MaterialKb => "material_kb",
    MaterialAttachments => "material_attachments",
    MaterialDocument => "material_document",
    MaterialPages => "material_pages",
    MaterialMore => "material_more",
    ImagesSeen => "images_seen",
    ImagesUnseen => "images_unseen",
    ImagesUnseenNoReader => "images_unseen_no_reader",
    ImageLine => "image_line",
    VisionProbe => "vision_probe",
    TagsManifest => "tags_manifest",
    TagsManifestTool => "tags_manifest_tool",
    FenceManifest => "fence_manifest",
    CodeManifest => "code_manifest",
    StructuredManifest => "structured_manifest",
    TongyiManifest => "tongyi_manifest",
    TongyiCode => "tongyi_code",
    DeepAnalyzeManifest => "deepanalyze_manifest",
    NudgeContinue => "nudge_continue",
    NudgeActNow => "nudge_act_now",
    NudgePlanFirst => "nudge_plan_first",
    NudgeOpenSteps => "nudge_open_steps",
    NudgeOpenStep => "nudge_open_step",
    Ultimatum => "ultimatum",
    NoticeRoundBudgetSpent => "notice_round_budget_spent",
    NoticeTokenBudget => "notice_token_budget",
    NoticeCallPlan => "notice_call_plan",
    NoticeCallStep => "notice_call_step",
    NoticeDraftsDiffer => "notice_drafts_differ",
    NoticeDraftsAgree => "notice_drafts_agree",
    NoticeDraftsAnswer => "notice_drafts_answer",
    UnreadableCall => "unreadable_call",
    SummaryAnswerHeader => "summary_answer_header",
    SummaryAnswerStep => "summary_answer_step",
    SummaryAnswerNotDone => "summary_answer_not_done",
    PlanAnalysis => "plan_analysis",
    ProgressHeader => "progress_header",
    ProgressSettlement => "progress_settlement",
    ProgressRoundsLeft => "progress_rounds_left",
    ProgressProblem => "progress_problem",
    ProgressCurrent => "progress_current",
    ProgressAllDone => "progress_all_done",
    ProgressWorkStep => "progress_work_step",
    OutputSnipped => "output_snipped",
    OutputOmitted => "output_omitted",
    NoResult => "no_result",
    InvalidJson => "invalid_json",
    MarkupNotAnObject => "markup_not_an_object",
    MarkupNoName => "markup_no_name",
    MarkupUnterminatedName => "markup_unterminated_name",
    MarkupNoArgumentBegin => "markup_no_argument_begin",
    MarkupNoFunctionName => "markup_no_function_name",
    MarkupNoToolSep => "markup_no_tool_sep",
    RefuseOverLimit => "refuse_over_limit",
    RefuseUnknownTool => "refuse_unknown_tool",
    RefuseUnreadableArguments => "refuse_unreadable_arguments",
    RefuseInvalidArguments => "refuse_invalid_arguments",
    RefuseDuplicate => "refuse_duplicate",
    RefuseRepetition => "refuse_repetition",
    RefusePlanFirst => "refuse_plan_first",
    RefuseNoImplementation => "refuse_no_implementation",
    RefuseFinishBatched => "refuse_finish_batched",
    ToolCancelled => "tool_cancelled",
    ToolTimedOut => "tool_timed_out",
    ToolPanicked => "tool_panicked",
    ToolFailed => "tool_failed",
    ToolInternalError => "tool_internal_error",
    SolvePlanDescription => "solve_plan_description",
    SolveFinishStepDescription => "solve_finish_step_description",
    SolveReplanDescription => "solve_replan_description",
    ParamAnalysis => "param_analysis",
    ParamSteps => "param_steps",
    ParamStepId => "param_step_id",
    ParamSummary => "param_summary",
    ParamReason => "param_reason",
    PlanExists => "plan_exists",
    PlanEmptySteps => "plan_empty_steps",
    PlanTruncated => "plan_truncated",
    PlanInstruction => "plan_instruction",
    FinishNoPlan => "finish_no_plan",
    FinishUnknownStep => "finish_unknown_step",
    FinishAlreadyDone => "finish_already_done",
    FinishSkipped => "finish_skipped",
    FinishEmptySummary => "finish_empty_summary",
    FinishRepeatedSummary => "finish_repeated_summary",
    FinishUnprintedResult => "finish_unprinted_result",
    FinishInstructionDone => "finish_instruction_done",
    FinishInstructionNext => "finish_instruction_next",
    ReplanBudgetSpent => "replan_budget_spent",
    ReplanNoReason => "replan_no_reason",
    ReplanEmptySteps => "replan_empty_steps",
    ReplanInstruction => "replan_instruction",
    NotASolveTool => "not_a_solve_tool",
}

/// The texts of one language, indexed by [`Text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Texts {
    language: Language,
    entries: Vec<Cow<'static, str>>,
}

static BUILTIN_EN: LazyLock<Arc<Texts>> =
    LazyLock::new(|| Arc::new(Texts::embedded(Language::En, EN)));
static BUILTIN_ZH: LazyLock<Arc<Texts>> =
    LazyLock::new(|| Arc::new(Texts::embedded(Language::Zh, ZH)));

/// Why an operator's text cannot replace a built-in one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("unknown prompt name '{name}'; the valid names are: {valid}")]
    UnknownName { name: String, valid: String },
}

/// The marker an operator's playbook writes where the mounted tools' lines go (`{tools}`);
/// the built-in playbook's own is `{tool_lines}`, which an override may use as well.
pub const TOOLS_MARKER: &str = "tools";

impl Texts {
    /// The languages with a built-in catalog.
    pub const LANGUAGES: [Language; 2] = [Language::En, Language::Zh];

    fn embedded(language: Language, files: &'static [&'static str]) -> Self {
        let entries = files
            .iter()
            .map(|f| Cow::Borrowed(f.strip_suffix('\n').unwrap_or(f)))
            .collect();
        Texts { language, entries }
    }

    /// The built-in texts of `language` (shared, built once).
    pub fn builtin(language: Language) -> Arc<Texts> {
        match language {
            Language::En => BUILTIN_EN.clone(),
            Language::Zh => BUILTIN_ZH.clone(),
        }
    }

    /// Every text's file name, in catalog order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Text::ALL.iter().map(|t| t.name())
    }

    /// The built-in texts of `language` with `overrides`, `(name, text)` pairs, in place of
    /// theirs (a final newline dropped, as from a file). An unknown name is an error listing
    /// the valid ones.
    pub fn with_overrides<'a>(
        language: Language,
        overrides: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Texts, OverrideError> {
        let mut texts = (*Texts::builtin(language)).clone();
        for (name, body) in overrides {
            let text = Text::by_name(name).ok_or_else(|| OverrideError::UnknownName {
                name: name.to_string(),
                valid: Texts::names().collect::<Vec<_>>().join(", "),
            })?;
            let body = body.strip_suffix('\n').unwrap_or(body);
            texts.entries[text as usize] = Cow::Owned(body.to_string());
        }
        Ok(texts)
    }

    /// The `{name}` placeholders of a template.
    pub fn placeholders(template: &str) -> BTreeSet<&str> {
        placeholders(template)
    }

    pub fn language(&self) -> Language {
        self.language
    }

    pub fn get(&self, text: Text) -> &str {
        // In bounds: every catalog has one entry per `Text`, in order (the macro builds both
        // from one list; a test checks the lengths).
        &self.entries[text as usize]
    }

    /// `text` with its placeholders filled from `args`.
    pub fn render(&self, text: Text, args: &[(&str, &dyn Display)]) -> String {
        // Checked on the built-in template: an operator's text may write any braces.
        debug_assert!(
            placeholders(Texts::builtin(self.language).get(text))
                .iter()
                .all(|p| args.iter().any(|(k, _)| k == p)),
            "{} is rendered without one of its placeholders",
            text.name()
        );
        fill(self.get(text), args)
    }
}

fn is_placeholder_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// The `{name}` placeholders of a template (a `{` not followed by `name}` is literal text).
pub(crate) fn placeholders(template: &str) -> BTreeSet<&str> {
    let mut found = BTreeSet::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let len = after
            .find(|c| !is_placeholder_char(c))
            .unwrap_or(after.len());
        if len > 0 && after[len..].starts_with('}') {
            found.insert(&after[..len]);
        }
        rest = after;
    }
    found
}

/// Fill `{name}` placeholders in one pass: values are never re-scanned, and a `{` that opens
/// no known placeholder is kept as it is.
pub(crate) fn fill(template: &str, args: &[(&str, &dyn Display)]) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let len = after
            .find(|c| !is_placeholder_char(c))
            .unwrap_or(after.len());
        let value = after[len..]
            .starts_with('}')
            .then(|| args.iter().find(|(k, _)| *k == &after[..len]))
            .flatten();
        match value {
            Some((_, value)) => {
                // Writing to a String cannot fail.
                let _ = write!(out, "{value}");
                rest = &after[len + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_defines_every_text_with_the_same_placeholders() {
        assert_eq!(EN.len(), Text::ALL.len());
        assert_eq!(ZH.len(), Text::ALL.len());
        let en = Texts::builtin(Language::En);
        for language in Texts::LANGUAGES {
            let texts = Texts::builtin(language);
            for text in Text::ALL {
                assert!(
                    !texts.get(*text).trim().is_empty(),
                    "{} is empty",
                    text.name()
                );
                assert_eq!(
                    placeholders(texts.get(*text)),
                    placeholders(en.get(*text)),
                    "{} in {}",
                    text.name(),
                    language.code()
                );
            }
        }
    }

    #[test]
    fn every_chinese_text_is_translated() {
        let (en, zh) = (Texts::builtin(Language::En), Texts::builtin(Language::Zh));
        for text in Text::ALL {
            assert_ne!(
                en.get(*text),
                zh.get(*text),
                "{} is not translated",
                text.name()
            );
        }
    }

    #[test]
    fn names_are_unique_and_listed() {
        let names: BTreeSet<&str> = Texts::names().collect();
        assert_eq!(names.len(), Text::ALL.len());
        assert!(names.contains("nudge_plan_first") && names.contains("playbook"));
    }

    #[test]
    fn fill_replaces_known_placeholders_once_and_keeps_other_braces() {
        let out = fill(
            "{a} and {b}: {\"json\": {...}} {unknown}",
            &[("a", &"{b}"), ("b", &2)],
        );
        assert_eq!(out, "{b} and 2: {\"json\": {...}} {unknown}");
    }

    #[test]
    fn overrides_replace_texts_by_name_and_unknown_names_list_the_valid_ones() {
        let zh = Texts::with_overrides(
            Language::Zh,
            [
                ("nudge_act_now", "现在就行动。\n"),
                ("ultimatum", "{x} \\frac{a}{b}"),
            ],
        )
        .unwrap();
        assert_eq!(zh.get(Text::NudgeActNow), "现在就行动。");
        assert_eq!(zh.render(Text::Ultimatum, &[]), "{x} \\frac{a}{b}");
        assert_eq!(
            zh.get(Text::NudgeContinue),
            Texts::builtin(Language::Zh).get(Text::NudgeContinue)
        );
        let err = Texts::with_overrides(Language::En, [("nudge_act", "x")]).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("'nudge_act'"), "{message}");
        assert!(message.contains("nudge_act_now, ") && message.contains("playbook, "));
    }

    #[test]
    fn the_final_newline_of_a_file_is_not_part_of_the_text() {
        let en = Texts::builtin(Language::En);
        assert!(!en.get(Text::NudgeActNow).ends_with('\n'));
        assert!(en.get(Text::Playbook).ends_with("next to them.\n"));
    }
}
