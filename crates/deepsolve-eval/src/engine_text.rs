//! Engine text in a graded output: what a student must never find in an answer — a
//! `[deepsolve:…]` marker, a sentence of the engine's own texts (the playbook, a nudge, a
//! notice, a refusal, a tool's description; English or Chinese, whichever the turn spoke), a
//! solve tool's name, or a tool call written out as JSON.
//!
//! This is the report's check, not the engine's: the engine cuts out of an answer the texts it
//! knows a model copies (core's `vet`); this scan looks for every sentence of every built-in
//! text, so an echo `vet` does not know is still counted. Matching ignores case, emphasis and
//! code marks, and runs of white space; a sentence too short to tell an echo from the model's
//! own words is not looked for.

use std::sync::LazyLock;

use deepsolve_core::solve::spine::SOLVE_TOOL_NAMES;
use deepsolve_core::{Language, Text, Texts};
use regex::Regex;

/// The marker every block the engine inserts into a conversation starts with.
const MARKER: &str = "[deepsolve:";

/// The shortest sentence looked for, in characters, without and with Chinese in it: shorter
/// ones ("Plan first.", "当前步骤") are as likely the model's own words.
const MIN_LATIN_CHARS: usize = 24;
const MIN_CJK_CHARS: usize = 10;

/// Texts that are not the engine speaking about itself: the draft's request is the ordinary
/// step-by-step prompt a model is asked plainly, and its words are the model's to use.
const NOT_ENGINE_SPEECH: &[Text] = &[Text::DraftSystem];

/// Every sentence of every built-in text worth looking for, normalised.
static SENTENCES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut sentences: Vec<String> = [Language::En, Language::Zh]
        .into_iter()
        .flat_map(|language| {
            let texts = Texts::builtin(language);
            Text::ALL
                .iter()
                .filter(|t| !NOT_ENGINE_SPEECH.contains(t))
                .flat_map(|&t| sentences_of(texts.get(t)))
                .collect::<Vec<_>>()
        })
        .collect();
    sentences.sort();
    sentences.dedup();
    sentences
});

/// A call written out: `"name": "…", "arguments"` in either order.
static CALL_AS_TEXT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#""name"\s*:\s*"[^"]*"\s*,\s*"arguments"|"arguments"\s*:[^}]*}\s*,\s*"name"\s*:"#)
        .ok()
});

/// The first piece of engine text in `output`, as found there (normalised), or `None`.
pub fn find(output: &str) -> Option<String> {
    if output.contains(MARKER) {
        return Some(MARKER.to_string());
    }
    if let Some(name) = SOLVE_TOOL_NAMES.iter().find(|n| output.contains(*n)) {
        return Some((*name).to_string());
    }
    if let Some(call) = CALL_AS_TEXT.as_ref().and_then(|re| re.find(output)) {
        return Some(call.as_str().to_string());
    }
    let text = normalise(output);
    SENTENCES
        .iter()
        .find(|s| text.contains(s.as_str()))
        .cloned()
}

/// A template's sentences worth looking for: split at its placeholders (filled with the
/// turn's own content), its lines and its sentence ends.
fn sentences_of(template: &str) -> Vec<String> {
    let without_placeholders = Texts::placeholders(template)
        .into_iter()
        .fold(template.to_string(), |text, name| {
            text.replace(&format!("{{{name}}}"), "\n")
        });
    without_placeholders
        .split('\n')
        .flat_map(split_sentences)
        .map(|s| normalise(s.trim_matches(|c: char| c.is_whitespace() || "-#>|:".contains(c))))
        .filter(|s| long_enough(s))
        .collect()
}

/// A line's sentences, each with its closing mark.
fn split_sentences(line: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = i + c.len_utf8();
        let closes = match c {
            '。' | '！' | '？' | '；' => true,
            '.' | '!' | '?' | ';' => chars.peek().is_none_or(|(_, next)| next.is_whitespace()),
            _ => false,
        };
        if closes {
            sentences.push(&line[start..end]);
            start = end;
        }
    }
    sentences.push(&line[start..]);
    sentences
}

/// Lower case, without emphasis or code marks, white space collapsed to one space.
fn normalise(text: &str) -> String {
    let kept: String = text
        .chars()
        .filter(|c| !matches!(c, '*' | '`'))
        .flat_map(char::to_lowercase)
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn long_enough(sentence: &str) -> bool {
    let chars = sentence.chars().count();
    if sentence.chars().any(is_cjk) {
        chars >= MIN_CJK_CHARS
    } else {
        chars >= MIN_LATIN_CHARS
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fff}' | '\u{3400}'..='\u{4dbf}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_in_the_model_s_own_words_has_none() {
        let answer = "The result is $72$.\n\nNatalia sold 48 clips in April and half as many, \
                      24, in May, so 48 + 24 = 72 clips in all.";
        assert_eq!(find(answer), None);
        assert_eq!(
            find("答案是 72。四月卖出 48 个，五月卖出一半即 24 个，共 72 个。"),
            None
        );
    }

    #[test]
    fn a_marker_a_tool_s_name_or_a_call_written_out_is_found() {
        assert_eq!(
            find("[deepsolve:progress] round 5 of 13").as_deref(),
            Some(MARKER)
        );
        assert_eq!(
            find("I will call solve_plan first.").as_deref(),
            Some("solve_plan")
        );
        assert!(find(r#"```json {"name": "code_execution", "arguments": {}} ```"#).is_some());
    }

    #[test]
    fn a_sentence_of_the_playbook_is_found_whatever_its_marks_and_case() {
        let echo = "The answer is 72. BE EXACT: prefer exact values, and give decimals only as \
                    approximations next to them.";
        let found = find(echo).expect("a playbook sentence");
        assert!(found.starts_with("be exact"), "{found}");
    }

    #[test]
    fn every_built_in_text_s_long_sentences_are_looked_for_in_both_languages() {
        for language in [Language::En, Language::Zh] {
            let texts = Texts::builtin(language);
            for &text in Text::ALL {
                if NOT_ENGINE_SPEECH.contains(&text) {
                    continue;
                }
                for sentence in sentences_of(texts.get(text)) {
                    let answer = format!("The result is 7.\n\n{sentence}");
                    assert!(find(&answer).is_some(), "{language:?} {text:?}: {sentence}");
                }
            }
        }
        assert!(SENTENCES.iter().any(|s| s.chars().any(is_cjk)));
        assert!(SENTENCES.len() > 100, "{}", SENTENCES.len());
    }

    #[test]
    fn the_draft_s_request_is_not_engine_speech() {
        let draft = Texts::builtin(Language::En)
            .get(Text::DraftSystem)
            .to_string();
        assert_eq!(find(&format!("{draft}\n\nThe result is 7.")), None);
    }

    #[test]
    fn the_call_pattern_compiles_and_placeholders_are_left_out() {
        assert!(CALL_AS_TEXT.is_some());
        assert!(SENTENCES.iter().all(|s| !s.contains("{tool_lines}")));
    }

    #[test]
    fn sentences_split_at_their_ends_not_inside_numbers() {
        assert_eq!(
            split_sentences("Pay $2.50 each. Then stop!"),
            vec!["Pay $2.50 each.", " Then stop!", ""]
        );
        assert_eq!(split_sentences("先计划。再做"), vec!["先计划。", "再做"]);
    }
}
