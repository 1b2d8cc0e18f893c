//! What may stand as an answer. Engine text never does: `[deepsolve:…]` markers and echoed
//! nudge, notice, ultimatum and refusal texts (of the turn's texts and of every built-in
//! language) are cut out of an answer. A reply that is left with nothing but apologies,
//! acknowledgements and promises to call a tool ("I apologize for the confusion. I will call
//! `solve_plan` first.") is not an answer at all.
//!
//! Conservative by design: text is only cut where it matches an engine text (ASCII case
//! aside; with the answer's sentence around it only where that sentence says no number), and
//! a reply is only refused when not one sentence of it says anything else. An answer that
//! needs no cleaning comes back byte for byte.

use std::collections::BTreeSet;

use serde_json::Value;

use super::turn::{Final, TurnRun};
use crate::event::{EventKind, WarningKind};
use crate::message::ToolCall;
use crate::outcome::{AnswerSource, StopReason};
use crate::progress::{STEP_DONE, STEP_OPEN};
use crate::solve::spine::{SOLVE_FINISH_STEP, SOLVE_TOOL_NAMES, are_solve_arguments};
use crate::texts::{Text, Texts};
use crate::wire::history::{Block, blocks, may_hold_a_call};

impl TurnRun<'_> {
    /// The one place every answer passes through before the turn ends: engine text cut out
    /// of it; a reply that is not an answer replaced through the forced-answer path (the
    /// model's by the step summaries or, without any, a forced call; a forced one by the
    /// summaries), until an answer stands or none is left.
    pub(super) async fn settle(&mut self, mut last: Final) -> Final {
        loop {
            let Some(text) = last.answer.take() else {
                return last;
            };
            match vet(&text, &self.texts, &self.shown_tail_lines, &self.problem) {
                Vetted::Answer(clean) => {
                    last.answer = Some(clean);
                    return last;
                }
                Vetted::NotAnAnswer => {
                    self.emit.emit(EventKind::Warning {
                        kind: WarningKind::ForcedAnswer,
                        message: "the reply was not an answer (engine text, apologies or promises to call a tool only)".into(),
                    });
                    last = self.instead_of(last).await;
                }
            }
        }
    }

    /// What follows an answer that was not one: the model is asked once more, under the
    /// ultimatum and offered no tools (the 1.5B model, every step finished, wrote its last
    /// `solve_finish_step` call again where its answer was due, and the step summaries stood
    /// in for the answer the model had in it); a forced reply that is not one either gives way
    /// to the step summaries.
    async fn instead_of(&mut self, refused: Final) -> Final {
        match refused.source {
            Some(AnswerSource::Model) => self.force_answer_again(StopReason::EmptyRounds).await,
            Some(AnswerSource::Forced) => Final {
                error: refused.error,
                ..self.summaries_answer(refused.stop)
            },
            Some(AnswerSource::StepSummaries) | None => Final {
                error: refused.error,
                ..Final::without_answer(refused.stop)
            },
        }
    }
}

impl TurnRun<'_> {
    /// Engine text copied into a step's summary is cut before the spine records it (the 0.5B
    /// model closed steps with the tail's own instruction as their summary): a summary is
    /// shown to the student, carried by every later progress block and may become the answer.
    /// A summary left empty is refused by the spine like any empty one.
    pub(super) fn clean_summaries(&self, calls: &mut [ToolCall]) {
        for call in calls.iter_mut().filter(|c| c.name == SOLVE_FINISH_STEP) {
            let Ok(mut args) = serde_json::from_str::<Value>(&call.arguments) else {
                continue;
            };
            let Some(summary) = args.get("summary").and_then(Value::as_str) else {
                continue;
            };
            let clean = without_engine_text(summary, &self.texts, &self.shown_tail_lines);
            if clean != summary {
                args["summary"] = Value::String(clean);
                call.arguments = args.to_string();
            }
        }
    }
}

/// `text` with the engine texts and the shown tail lines it copied cut out (unchanged when
/// it copied none).
pub(crate) fn without_engine_text(text: &str, texts: &Texts, shown: &BTreeSet<String>) -> String {
    Echoes::of(texts).with_shown(shown).strip(text)
}

/// The engine texts a model may echo back.
const ECHOED: &[Text] = &[
    Text::NudgeContinue,
    Text::NudgeActNow,
    Text::NudgePlanFirst,
    Text::NudgeOpenSteps,
    Text::NudgeOpenStep,
    Text::Ultimatum,
    Text::NoticeRoundBudgetSpent,
    Text::NoticeTokenBudget,
    // The forced-call notices and the progress block of the ephemeral tail: a small model
    // copies them into its text (seen with the 0.5B model on llama.cpp's server).
    Text::NoticeCallPlan,
    Text::NoticeCallStep,
    Text::NoticeDraftsAgree,
    Text::NoticeDraftsAnswer,
    Text::NoticeDraftsDiffer,
    Text::PlanInstruction,
    Text::ProgressHeader,
    Text::ProgressRoundsLeft,
    Text::ProgressSettlement,
    Text::ProgressAllDone,
    Text::ProgressWorkStep,
    Text::RefuseOverLimit,
    Text::RefuseUnknownTool,
    Text::RefuseUnreadableArguments,
    Text::RefuseInvalidArguments,
    Text::RefuseDuplicate,
    Text::RefuseRepetition,
    Text::RefusePlanFirst,
    Text::RefuseNoImplementation,
    Text::RefuseFinishBatched,
    Text::FinishRepeatedSummary,
    Text::FinishUnprintedResult,
    // The solve tools' descriptions: the 0.5B model filled a summary with its parameter's
    // description ("这一步的结论：关键结果与数值。").
    Text::SolvePlanDescription,
    Text::SolveFinishStepDescription,
    Text::SolveReplanDescription,
    Text::ParamAnalysis,
    Text::ParamSteps,
    Text::ParamSummary,
    Text::ParamReason,
];

/// What a reply amounts to, once engine text is cut out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Vetted {
    /// The answer: the reply itself, or the reply without the engine text it echoed.
    Answer(String),
    /// Nothing but engine text, apologies and promises.
    NotAnAnswer,
}

/// `text` as an answer, with the engine texts of `texts` and of every built-in language cut,
/// and every telling line of the tails the model was shown (`shown`): a small model copies the
/// progress block — the problem, the plan, the step lines — back as its answer (seen with the
/// 1.5B model in-process).
///
/// A reply that says nothing but sentences of the `problem` itself is not an answer either
/// (the 0.5B model's forced answer was the problem, word for word); an answer that quotes the
/// problem and goes on comes back whole.
pub(crate) fn vet(text: &str, texts: &Texts, shown: &BTreeSet<String>, problem: &str) -> Vetted {
    let stripped = without_solve_tool_sentences(&without_engine_text(text, texts, shown));
    if !has_substance(&stripped) || only_restates(&stripped, problem) {
        return Vetted::NotAnAnswer;
    }
    Vetted::Answer(stripped)
}

/// Every sentence of `text` that says something is found in `problem`, and together they
/// are long enough to tell (a short answer the problem happens to contain is an answer).
fn only_restates(text: &str, problem: &str) -> bool {
    let said: Vec<&str> = sentences(text)
        .map(str::trim)
        .filter(|s| s.chars().any(char::is_alphanumeric) && !is_meta(s))
        .collect();
    is_telling(&said.join(" ")) && said.iter().all(|s| problem.contains(s))
}

/// The longest a placeholder's value may be inside an echoed text.
const MAX_VALUE_CHARS: usize = 200;

/// The echoable texts: each as its fixed pieces (to cut a rendered echo, values and all), and
/// their telling sentences (to cut a partial echo), longest first.
struct Echoes {
    templates: Vec<Vec<String>>,
    phrases: Vec<String>,
    /// The tail lines shown (markers stripped): a line that starts one of them is a copy.
    shown: Vec<String>,
    /// The current step's mark (`<- current`) of each built-in language.
    current_marks: Vec<String>,
}

impl Echoes {
    fn of(texts: &Texts) -> Self {
        let catalogs = [
            texts,
            &*Texts::builtin(crate::solve::Language::En),
            &*Texts::builtin(crate::solve::Language::Zh),
        ];
        let all: Vec<&str> = catalogs
            .iter()
            .flat_map(|catalog| ECHOED.iter().map(|t| catalog.get(*t)))
            .collect();
        let templates = all
            .iter()
            .map(|t| fixed_pieces(t))
            .filter(|pieces| is_telling(&pieces.concat()))
            .collect();
        let mut phrases: Vec<String> = all
            .iter()
            .flat_map(|t| fixed_pieces(t))
            .flat_map(|piece| {
                let mut out: Vec<String> =
                    sentences(&piece).map(|s| s.trim().to_string()).collect();
                out.push(piece.trim().to_string());
                out
            })
            // A copy drops a tool name's backticks as often as it keeps them (the 0.5B
            // model's summaries end "then call solve_finish_step with the step's result.").
            .flat_map(|phrase| {
                let bare = phrase.replace('`', "");
                if bare == phrase {
                    vec![phrase]
                } else {
                    vec![phrase, bare]
                }
            })
            .filter(|p| is_telling(p) || is_an_engine_sentence(p))
            .collect();
        phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
        phrases.dedup();
        Echoes {
            templates,
            phrases,
            shown: Vec::new(),
            current_marks: Texts::LANGUAGES
                .iter()
                .map(|l| Texts::builtin(*l).get(Text::ProgressCurrent).to_string())
                .collect(),
        }
    }

    /// These echoes and the telling lines of `shown` (markers stripped), longest first. A
    /// step line is also cut without its checkbox and without its `<- current` mark: the
    /// 0.5B model copied `[ ] S2 …` from `[ ] S2 …   <- current`.
    fn with_shown(mut self, shown: &BTreeSet<String>) -> Self {
        let shown: Vec<String> = shown
            .iter()
            .map(|line| strip_markers(line).trim().to_string())
            .collect();
        let copies: Vec<String> = shown
            .iter()
            .flat_map(|line| self.line_variants(line))
            .filter(|line| is_telling(line))
            .collect();
        self.phrases.extend(copies);
        self.phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
        self.phrases.dedup();
        self.shown = shown;
        self
    }

    /// `line` (trimmed) is nothing but the start of a shown line, three words or more (the
    /// 0.5B model answered "Work step S3 now" from "Work step S3 now: …").
    fn starts_a_shown_line(&self, line: &str) -> bool {
        line.split_whitespace().count() >= 3
            && line.len() >= 12
            && self.shown.iter().any(|shown| shown.starts_with(line))
    }

    /// `text` without engine markers and echoes; a line left with nothing to say is dropped.
    /// Unchanged text comes back as it was.
    fn strip(&self, text: &str) -> String {
        let without_calls = without_written_protocol(text);
        let mut changed = without_calls.len() != text.len();
        let mut kept = Vec::new();
        for line in without_calls.lines() {
            if self.is_step_mark(line.trim())
                || self.starts_a_shown_line(line.trim())
                || is_protocol_json(line)
            {
                changed = true;
                continue;
            }
            let mut cut = strip_markers(line);
            for template in &self.templates {
                while let Some(span) = find_rendered(&cut, template) {
                    cut.replace_range(span, "");
                }
            }
            for phrase in &self.phrases {
                cut = without_echo(&cut, phrase);
            }
            // A copied step line keeps its goal but not the mark after it.
            for mark in &self.current_marks {
                if cut.trim_end().ends_with(mark.as_str()) {
                    cut.truncate(cut.trim_end().len() - mark.len());
                }
            }
            if cut == line {
                kept.push(cut);
                continue;
            }
            changed = true;
            if cut.chars().any(char::is_alphanumeric) && !self.is_step_mark(cut.trim()) {
                kept.push(cut.trim().to_string());
            }
        }
        if !changed {
            return text.to_string();
        }
        kept.join("\n").trim().to_string()
    }
}

impl Echoes {
    /// `line` is a mark of the progress block alone: a checkbox, or the current step's mark.
    fn is_step_mark(&self, line: &str) -> bool {
        line == STEP_OPEN || line == STEP_DONE || self.current_marks.iter().any(|m| m == line)
    }

    /// `line`, and as a step line of the progress block may be copied: without its
    /// `<- current` mark, and either of those without its checkbox.
    fn line_variants(&self, line: &str) -> Vec<String> {
        let mut variants = vec![line.to_string()];
        for mark in &self.current_marks {
            if let Some(bare) = line.strip_suffix(mark.as_str()) {
                variants.push(bare.trim_end().to_string());
            }
        }
        let unboxed: Vec<String> = variants
            .iter()
            .filter_map(|v| {
                [STEP_OPEN, STEP_DONE]
                    .iter()
                    .find_map(|mark| v.strip_prefix(mark))
                    .map(|rest| rest.trim_start().to_string())
            })
            .collect();
        variants.extend(unboxed);
        variants
    }
}

/// `text` writes out a tool call or a spine result: as the whole reply, or in a fenced block
/// (the 1.5B model on llama.cpp's server answered with a sentence and a ```` ```json ````
/// `solve_finish_step` call).
pub(crate) fn writes_a_call(text: &str) -> bool {
    is_protocol_json(text) || matches!(without_written_protocol(text), std::borrow::Cow::Owned(_))
}

/// `text` without the fenced blocks that hold a tool call or a spine result written out
/// (borrowed when it has none).
fn without_written_protocol(text: &str) -> std::borrow::Cow<'_, str> {
    let written: Vec<Block> = blocks(text)
        .into_iter()
        .filter(|b| may_hold_a_call(b) && is_protocol_json(&text[b.body.clone()]))
        .collect();
    if written.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for block in written {
        out.push_str(&text[pos..block.start]);
        pos = block.end;
    }
    out.push_str(&text[pos..]);
    std::borrow::Cow::Owned(out)
}

/// A JSON object that is a tool call (`name` and `arguments`, or `arguments` alone), a solve
/// call's arguments alone, or a spine tool's result (`status` and `instruction`) written out
/// as text: the protocol, never an
/// answer (the 0.5B model's final round wrote its `solve_finish_step` call and the result it
/// had been shown). Keys count with blanks around them: held off `"name"` by the in-process
/// grammar, the 1.5B model wrote `"name "`.
fn is_protocol_json(text: &str) -> bool {
    let text = text.trim();
    if !text.starts_with('{') {
        return false;
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let get = |key: &str| (object.iter()).find_map(|(k, v)| (k.trim() == key).then_some(v));
    let has_arguments = get("arguments").or_else(|| get("parameters")).is_some();
    let is_call = has_arguments && (object.len() == 1 || get("name").is_some_and(Value::is_string));
    let is_spine_result = get("status").is_some_and(Value::is_string)
        && get("instruction").is_some_and(Value::is_string);
    let keys: Vec<&str> = object.keys().map(|k| k.trim()).collect();
    is_call || is_spine_result || are_solve_arguments(&keys)
}

/// A template's fixed text, split at its placeholders (empty pieces where a placeholder
/// opens or closes it).
fn fixed_pieces(template: &str) -> Vec<String> {
    let mut pieces = vec![template.to_string()];
    for name in Texts::placeholders(template) {
        let placeholder = format!("{{{name}}}");
        pieces = pieces
            .iter()
            .flat_map(|piece| piece.split(&placeholder))
            .map(str::to_string)
            .collect();
    }
    pieces
}

/// Where `line` holds the template of `pieces` rendered: its pieces in order, each value
/// between them short and on the line; a value that opens or closes it is one word.
fn find_rendered(line: &str, pieces: &[String]) -> Option<std::ops::Range<usize>> {
    let opens_with_value = pieces.first().is_some_and(|p| p.is_empty());
    let pieces = if opens_with_value {
        &pieces[1..]
    } else {
        pieces
    };
    let (first, rest) = pieces.split_first()?;
    if first.is_empty() {
        return None;
    }
    let mut search_from = 0;
    loop {
        let anchor = search_from + line[search_from..].find(first.as_str())?;
        if let Some(end) = match_rest(line, anchor + first.len(), rest) {
            let start = if opens_with_value {
                word_start(line, anchor)
            } else {
                anchor
            };
            return Some(start..end);
        }
        search_from = anchor + first.len();
    }
}

/// The end of `pieces` matched from `at`, each after a short value.
fn match_rest(line: &str, mut at: usize, pieces: &[String]) -> Option<usize> {
    for (i, piece) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        if piece.is_empty() && last {
            return Some(word_end(line, at));
        }
        let window_end = line[at..]
            .char_indices()
            .nth(MAX_VALUE_CHARS)
            .map_or(line.len(), |(i, _)| at + i);
        let found = line[at..window_end].find(piece.as_str())?;
        at += found + piece.len();
    }
    Some(at)
}

/// The start of the word that ends at `at`.
fn word_start(line: &str, at: usize) -> usize {
    line[..at].rfind(char::is_whitespace).map_or(0, |i| {
        i + line[i..].chars().next().map_or(1, char::len_utf8)
    })
}

/// The end of the word that starts at `at`.
fn word_end(line: &str, at: usize) -> usize {
    line[at..]
        .find(char::is_whitespace)
        .map_or(line.len(), |i| at + i)
}

fn is_cjk(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// `line` without `phrase` (matched ignoring ASCII case: a copy starts a sentence with a
/// word the text had in its middle). A phrase inside a sentence that says no number takes
/// the sentence with it: the rest only talks about the answer ("This result is stated
/// plainly, and the explanation follows.", the 1.5B model after the answer round's tail
/// "…stated plainly; the explanation follows."); beside a number only the phrase goes.
fn without_echo(line: &str, phrase: &str) -> String {
    let needle = phrase.to_ascii_lowercase();
    let mut out = line.to_string();
    // ASCII lowering keeps every byte offset, so a match in the copy is one in `out`.
    while let Some(at) = out.to_ascii_lowercase().find(&needle) {
        let end = at + needle.len();
        let sentence = enclosing_sentences(&out, at..end);
        let rest = format!("{}{}", &out[sentence.start..at], &out[end..sentence.end]);
        let cut = if says_a_number(&rest) {
            at..end
        } else {
            sentence
        };
        out.replace_range(cut, "");
    }
    out
}

/// The sentences of `text` (see `sentence_spans`) that `range` touches, as one range.
fn enclosing_sentences(text: &str, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let mut start = 0;
    let mut first = 0;
    for span in sentence_spans(text) {
        let end = start + span.len();
        if end <= range.start {
            first = end;
        }
        if end >= range.end {
            return first..end;
        }
        start = end;
    }
    first..text.len()
}

/// `text` states a number or a boxed result.
fn says_a_number(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_digit()) || text.contains("\\boxed")
}

/// As long as the sentences the evaluation report counts as engine text when found in an
/// answer (24 characters, or 10 with Chinese in them): every such sentence of an echoed text
/// is cut, though it has fewer words than [`is_telling`] asks of a piece.
fn is_an_engine_sentence(sentence: &str) -> bool {
    let chars = sentence.chars().count();
    if sentence.chars().any(is_cjk) {
        chars >= 10
    } else {
        chars >= 24
    }
}

/// Long enough that a real answer would not contain it by chance.
fn is_telling(piece: &str) -> bool {
    let cjk = piece.chars().filter(|c| is_cjk(*c)).count();
    let words = piece.split_whitespace().count();
    cjk >= 8 || (words >= 4 && piece.len() >= 24)
}

/// `line` without `[deepsolve:word]` markers (and the space after one).
fn strip_markers(line: &str) -> String {
    const OPEN: &str = "[deepsolve:";
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_' || c == '-'))
            .unwrap_or(after.len());
        if after[name_len..].starts_with(']') {
            rest = after[name_len + 1..]
                .strip_prefix(' ')
                .unwrap_or(&after[name_len + 1..]);
        } else {
            out.push_str(OPEN);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `text` without its sentences that name a solve tool: in an answer they only narrate the
/// engine to the student ("Call `solve_finish_step` with the result 30000.", the 0.5B
/// model). Unchanged text comes back as it was.
fn without_solve_tool_sentences(text: &str) -> String {
    if !names_a_solve_tool(text) {
        return text.to_string();
    }
    let kept: Vec<String> = text
        .lines()
        .filter_map(|line| {
            if !names_a_solve_tool(line) {
                return Some(line.to_string());
            }
            let rest: String = sentence_spans(line)
                .into_iter()
                .filter(|s| !names_a_solve_tool(s))
                .collect();
            (!is_list_marker(rest.trim())).then(|| rest.trim_end().to_string())
        })
        .collect();
    kept.join("\n").trim().to_string()
}

/// `text` names `solve_plan`, `solve_finish_step` or `solve_replan`.
fn names_a_solve_tool(text: &str) -> bool {
    SOLVE_TOOL_NAMES.iter().any(|tool| text.contains(tool))
}

/// Nothing, or only what opens a list item (`-`, `*`, `•`, `3.`, `3)`).
fn is_list_marker(text: &str) -> bool {
    let numbered = text
        .strip_suffix(['.', ')'])
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    text.is_empty() || matches!(text, "-" | "*" | "•") || numbered
}

/// The sentences of `text`, blank ones left out (see `sentence_spans`).
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    sentence_spans(text)
        .into_iter()
        .filter(|s| !s.trim().is_empty())
}

/// `text` cut into sentences that together are the whole text: cut after `.`/`!`/`?` followed by a space or the end (so `3.14`
/// stays whole), after `。！？；`, and at line ends.
fn sentence_spans(text: &str) -> Vec<&str> {
    let mut cuts = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = i + c.len_utf8();
        let ends_sentence = match c {
            '。' | '！' | '？' | '；' | '\n' | '…' => true,
            '.' | '!' | '?' | ';' => chars.peek().is_none_or(|(_, next)| next.is_whitespace()),
            _ => false,
        };
        if ends_sentence {
            cuts.push(end);
        }
    }
    let mut start = 0;
    let mut out = Vec::new();
    for cut in cuts {
        out.push(&text[start..cut]);
        start = cut;
    }
    out.push(&text[start..]);
    out
}

/// Some sentence says something besides apologies, acknowledgements and promises to call a
/// tool.
fn has_substance(text: &str) -> bool {
    sentences(text).any(|s| {
        let says_something = s.chars().any(|c| c.is_alphanumeric());
        says_something && !is_meta(s)
    })
}

/// A sentence about the conversation, not the problem: an apology, an acknowledgement, a
/// promise to call a tool or make a plan, or one naming a solve tool.
fn is_meta(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    let lower = lower.trim();
    is_acknowledgement(lower)
        || APOLOGIES.iter().any(|a| lower.contains(a))
        || names_a_solve_tool(lower)
        || (INTENTIONS.iter().any(|i| lower.contains(i))
            && CALL_WORDS.iter().any(|w| lower.contains(w)))
}

const APOLOGIES: &[&str] = &[
    "i apologize",
    "i apologise",
    "my apologies",
    "apologies for",
    "sorry for",
    "sorry about",
    "i'm sorry",
    "i am sorry",
    "抱歉",
    "对不起",
    "不好意思",
];

/// An intention to act next, in the first person.
const INTENTIONS: &[&str] = &[
    "i will",
    "i'll",
    "i shall",
    "let me",
    "i am going to",
    "i'm going to",
    "i need to",
    "i should",
    "i must",
    "i'm now going",
    "我将",
    "我会",
    "让我",
    "我先",
    "我来",
    "我需要",
    "我应该",
    "我现在",
    "我接下来",
    "我要",
];

/// What a promise to act on the conversation, not the problem, names.
const CALL_WORDS: &[&str] = &[
    "call", "invoke", "tool", "a plan", "the plan", "调用", "工具", "计划",
];

fn is_acknowledgement(lower: &str) -> bool {
    const ACKNOWLEDGEMENTS: &[&str] = &[
        "understood",
        "ok",
        "okay",
        "sure",
        "got it",
        "certainly",
        "of course",
        "you are right",
        "you're right",
        "noted",
        "好的",
        "好",
        "明白",
        "明白了",
        "收到",
        "知道了",
        "你说得对",
        "当然",
    ];
    let bare = lower.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && !is_cjk(c));
    ACKNOWLEDGEMENTS.contains(&bare)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::Language;

    fn en() -> std::sync::Arc<Texts> {
        Texts::builtin(Language::En)
    }

    fn answer(text: &str) -> Vetted {
        vet(text, &en(), &BTreeSet::new(), "")
    }

    #[test]
    fn a_plain_answer_comes_back_byte_for_byte() {
        for text in [
            "x = 42.",
            "The roots are 2 and 3.\n\nAnswer: 42",
            "I will use the quadratic formula: x = (5 ± 1) / 2, so x = 2 or x = 3.",
            "Sorry, the problem has no real solution: the discriminant is -7.",
            "答案是 42。",
            "π ≈ 3.14159",
            "The tool of choice is induction; by induction on n the sum is n(n+1)/2.",
        ] {
            assert_eq!(answer(text), Vetted::Answer(text.to_string()), "{text}");
        }
    }

    /// The 1.5B model's answer in a real turn: the progress block it was shown, copied back.
    #[test]
    fn a_progress_block_copied_back_is_not_an_answer_and_an_answer_beside_it_is_kept() {
        let tail = "[deepsolve:progress] round 6 of 12 · replans 0 of 2\n\
            Problem: Frankie watched 7 hours of TV in all; how many 30-minute episodes did he watch on Wednesday?\n\
            Plan: Add up the known days, then divide the rest by half an hour.\n  \
            [x] S1 Determine the episodes watched on Wednesday. — Frankie watched 0 episodes.\n\
            All steps are done: write the final answer now.";
        let shown: BTreeSet<String> = tail.lines().map(|l| l.trim().to_string()).collect();
        let copied = tail.replace("[deepsolve:progress] ", "");
        assert_eq!(vet(&copied, &en(), &shown, ""), Vetted::NotAnAnswer);
        let beside = format!("{copied}\n\nHe watched 3 episodes on Wednesday.");
        assert_eq!(
            vet(&beside, &en(), &shown, ""),
            Vetted::Answer("He watched 3 episodes on Wednesday.".into())
        );
        // A step line copied without its mark or its checkbox is cut all the same.
        let step = "  [ ] S2 She sells the remainder at the market for $2 an egg   <- current";
        let shown_step: BTreeSet<String> = [step.trim().to_string()].into();
        assert_eq!(
            vet(
                "[ ] S2 She sells the remainder at the market for $2 an egg",
                &en(),
                &shown_step,
                ""
            ),
            Vetted::NotAnAnswer
        );
        assert_eq!(
            vet(
                "S2 She sells the remainder at the market for $2 an egg\nSo she makes $18.",
                &en(),
                &shown_step,
                ""
            ),
            Vetted::Answer("So she makes $18.".into())
        );
        // The 0.5B model's forced answer: the start of the directive, the marks alone on their
        // lines, and a call written out: nothing of it is an answer.
        let directive = "[deepsolve:notice] Work step S3 now: She sells the rest at the market. Reason it through in a few sentences, using a tool where one helps; then call `solve_finish_step` with the step's result.";
        let shown_directive: BTreeSet<String> = [directive.to_string()].into();
        let fragments = "Work step S3 now\n[x]\n<- current\n{\"name\": \"solve_finish_step\", \"arguments\": {\"step_id\": \"S3\", \"summary\": \"She sells the rest\"}}";
        assert_eq!(
            vet(fragments, &en(), &shown_directive, ""),
            Vetted::NotAnAnswer
        );
        // The settlement note, copied, and a mark after a line the model wrote itself.
        let settlement = en().render(
            Text::ProgressSettlement,
            &[("round", &2), ("settlement_rounds", &2)],
        );
        assert_eq!(
            vet(&format!("· {settlement}"), &en(), &BTreeSet::new(), ""),
            Vetted::NotAnAnswer
        );
        assert_eq!(
            vet("Daisy has $175   <- current", &en(), &BTreeSet::new(), ""),
            Vetted::Answer("Daisy has $175".into())
        );
        // What was not shown is not cut.
        let own = "Plan: count the hours first, then the episodes of each day in turn.";
        assert_eq!(vet(own, &en(), &shown, ""), Vetted::Answer(own.into()));
    }

    #[test]
    fn the_problem_restated_is_not_an_answer_and_an_answer_quoting_it_is_kept() {
        let problem = "Susan earns $5 every 10 minutes for an online task she does. If she works between 8 a.m. and 11 a.m. and pauses in between for half an hour, how much money does she earn for the online task?";
        let none = BTreeSet::new();
        assert_eq!(vet(problem, &en(), &none, problem), Vetted::NotAnAnswer);
        let quoting = "Susan earns $5 every 10 minutes for an online task she does. She works 150 minutes, so she earns $75.";
        assert_eq!(
            vet(quoting, &en(), &none, problem),
            Vetted::Answer(quoting.into())
        );
        // A short answer the problem happens to contain still stands.
        assert_eq!(
            vet("$5", &en(), &none, problem),
            Vetted::Answer("$5".into())
        );
    }

    #[test]
    fn a_summary_keeps_its_result_without_the_instruction_it_copied() {
        let directive = en().render(
            Text::ProgressWorkStep,
            &[("id", &"S2"), ("goal", &"Eggs left for sale")],
        );
        let shown: BTreeSet<String> = [format!("[deepsolve:notice] {directive}")].into();
        let copied = "16 - 3 - 4 = 9 eggs are left. Reason it through in a few sentences, using a tool where one helps; then call `solve_finish_step` with the step's result.";
        // The template's own ". " before its instruction goes with it.
        assert_eq!(
            without_engine_text(copied, &en(), &shown),
            "16 - 3 - 4 = 9 eggs are left"
        );
        let own = "16 - 3 - 4 = 9 eggs are left.";
        assert_eq!(without_engine_text(own, &en(), &shown), own);
    }

    /// The 0.5B model's final rounds (GSM8K, seed 2): its last call and the result it had been
    /// shown, written out as the answer, bare or fenced.
    #[test]
    fn a_call_or_a_spine_result_written_out_is_not_an_answer() {
        let call = r#"{"name": "solve_finish_step", "arguments": {"step_id": "S1", "summary": "The sum of their ages in 10 years is 20"}}"#;
        let result = r#"{"all_done":true,"completed":{"done":true,"goal":"The tattered jeans cost $28","id":"S3","summary":"The tattered jeans cost $28"},"instruction":"Write the final answer now.","next":null,"status":"step_done"}"#;
        assert_eq!(answer(&format!("{call}\n{result}")), Vetted::NotAnAnswer);
        assert_eq!(answer(result), Vetted::NotAnAnswer);
        let fenced = format!("```json\n{call}\n```\nSo the answer is 40.");
        assert_eq!(
            answer(&fenced),
            Vetted::Answer("So the answer is 40.".into())
        );
        // Held off `"name"` by the in-process grammar, the 1.5B model wrote `"name "` (its
        // answer round, build dd3988c); a call's arguments alone are a call too.
        let dodged = "**Step S3**: The total number of DVDs sold is 7 DVDs.\n\n**Call `solve_finish_step` with the step's result**:\n```json\n{\n  \"name \": \"solve_finish_step\",\n  \"arguments\": {\n    \"step_id\": \"S3\",\n    \"summary\": \"7 DVDs.\"\n  }\n}\n```";
        assert_eq!(
            answer(dodged),
            Vetted::Answer("**Step S3**: The total number of DVDs sold is 7 DVDs.".into())
        );
        let nameless = r#"{"arguments": {"step_id": "S3", "summary": "7 DVDs."}}"#;
        assert_eq!(answer(nameless), Vetted::NotAnAnswer);
        // A solve call's arguments alone, after the answer (the 1.5B model, build 6c13cd1).
        let trailed = "The average age is 37.\n\n```\n{\"step_id\": \"S4\", \"summary\": \"The average age is 37.\"}\n```";
        assert_eq!(
            answer(trailed),
            Vetted::Answer("The average age is 37.".into())
        );
        assert_eq!(
            answer(r#"{"analysis": "Add them.", "steps": [{"goal": "Add"}]}"#),
            Vetted::NotAnAnswer
        );
        // JSON that is the answer's own content stays.
        for own in [
            r#"{"x": 2, "y": 3}"#,
            r#"{"arguments": 2, "verdict": "sound"}"#,
            r#"{"summary": "sound", "steps": 3}"#,
            "The pair is:\n```json\n{\"name\": \"Ann\", \"age\": 12}\n```",
        ] {
            assert_eq!(answer(own), Vetted::Answer(own.into()), "{own}");
        }
    }

    #[test]
    fn a_sentence_naming_a_solve_tool_is_cut_from_an_answer() {
        let narrated = "600 x 50 = 30000 burritos.\n   - Call `solve_finish_step` with the result 30000.\n\nSo he has 29800 left.";
        assert_eq!(
            answer(narrated),
            Vetted::Answer("600 x 50 = 30000 burritos.\n\nSo he has 29800 left.".into())
        );
        assert_eq!(
            answer("This is done by calling solve_finish_step with the step's result."),
            Vetted::NotAnAnswer
        );
        assert_eq!(
            answer("1. Add the costs. Then call solve_plan.\n2. Call `solve_replan`.\nTotal: 12."),
            Vetted::Answer("1. Add the costs.\nTotal: 12.".into())
        );
    }

    #[test]
    fn a_parameter_description_copied_as_a_summary_leaves_nothing() {
        let zh = Texts::builtin(Language::Zh);
        let copied = zh.get(Text::ParamSummary);
        assert_eq!(without_engine_text(copied, &zh, &BTreeSet::new()), "");
        let own = "共 120 页，已读 40 页。";
        assert_eq!(without_engine_text(own, &zh, &BTreeSet::new()), own);
    }

    #[test]
    fn an_instruction_copied_without_its_backticks_is_cut_too() {
        let copied = "John has $50 and the trip costs $300.  then call solve_finish_step with the step's result.";
        assert_eq!(
            without_engine_text(copied, &en(), &BTreeSet::new()),
            "John has $50 and the trip costs $300."
        );
    }

    #[test]
    fn apologies_and_promises_to_call_a_tool_are_not_an_answer() {
        for text in [
            "I apologize for the confusion. I will call `solve_plan` first (a short analysis and ordered steps), then work the steps.",
            "I apologize for the confusion.",
            "Understood. Let me call the tool now.",
            "Sure! I'll make a plan first.",
            "抱歉造成了困惑。我会先调用 `solve_plan`。",
            "好的，我将先制定计划。",
            "   ",
        ] {
            assert_eq!(answer(text), Vetted::NotAnAnswer, "{text}");
        }
    }

    #[test]
    fn an_echoed_nudge_is_cut_or_refused() {
        let nudge = en().get(Text::NudgePlanFirst).to_string();
        assert_eq!(
            answer(&format!("[deepsolve:nudge] {nudge}")),
            Vetted::NotAnAnswer
        );
        assert_eq!(
            answer(&format!(
                "[deepsolve:nudge] {nudge}\n\nx = 42, since 6 * 7 = 42."
            )),
            Vetted::Answer("x = 42, since 6 * 7 = 42.".into())
        );
        let zh = Texts::builtin(Language::Zh);
        let echoed = format!("{}\n答案是 42。", zh.get(Text::NudgePlanFirst));
        assert_eq!(answer(&echoed), Vetted::Answer("答案是 42。".into()));
    }

    #[test]
    fn a_rendered_refusal_is_cut_by_its_fixed_pieces() {
        let refusal = en().render(Text::RefuseRepetition, &[("times", &3)]);
        assert_eq!(answer(&refusal), Vetted::NotAnAnswer);
        let with_answer = format!("{refusal} The sum is 10.");
        assert_eq!(
            answer(&with_answer),
            Vetted::Answer("The sum is 10.".into())
        );
    }

    #[test]
    fn markers_are_cut_wherever_they_stand() {
        assert_eq!(
            answer("Answer: 42 [deepsolve:ultimatum]"),
            Vetted::Answer("Answer: 42".into())
        );
        assert_eq!(answer("[deepsolve:nudge]"), Vetted::NotAnAnswer);
        let unfinished = "See [deepsolve: docs] for 42.";
        assert_eq!(answer(unfinished), Vetted::Answer(unfinished.into()));
    }

    #[test]
    fn every_echoable_text_of_both_languages_alone_is_not_an_answer() {
        for language in Texts::LANGUAGES {
            let texts = Texts::builtin(language);
            for text in ECHOED {
                let template = texts.get(*text);
                if !Texts::placeholders(template).is_empty() {
                    continue;
                }
                assert_eq!(
                    vet(
                        &format!("[deepsolve:nudge] {template}"),
                        &en(),
                        &BTreeSet::new(),
                        ""
                    ),
                    Vetted::NotAnAnswer,
                    "{} in {}",
                    text.name(),
                    language.code()
                );
            }
        }
    }

    /// The 1.5B model's right answer (GSM8K `line-849`, build ca957ed) ended by saying the
    /// answer round's tail back about itself.
    #[test]
    fn a_sentence_talking_about_the_answer_in_the_tail_s_words_is_cut() {
        let said_back = "The final answer is:\n\\[\n\\boxed{10}\n\\]\nThis result is stated plainly, and the explanation follows.";
        assert_eq!(
            answer(said_back),
            Vetted::Answer("The final answer is:\n\\[\n\\boxed{10}\n\\]".into())
        );
        // A copy that starts its sentence with the text's middle word is a copy too.
        assert_eq!(
            answer("x = 42.\nThe explanation follows."),
            Vetted::Answer("x = 42.".into())
        );
        // Beside a number only the echo goes.
        assert_eq!(
            answer("Each box holds 12, so the explanation follows."),
            Vetted::Answer("Each box holds 12, so".into())
        );
        let zh = Texts::builtin(Language::Zh);
        let none = BTreeSet::new();
        assert_eq!(
            vet(
                "答案是 42。\n如上所述，第一行直接写出结果本身，说明放在后面。",
                &zh,
                &none,
                ""
            ),
            Vetted::Answer("答案是 42。".into())
        );
        // The answer's own words about explanations stay.
        let own = "The explanation is short: 6 * 7 = 42.";
        assert_eq!(answer(own), Vetted::Answer(own.into()));
    }
}
