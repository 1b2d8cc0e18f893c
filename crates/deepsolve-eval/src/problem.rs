//! A problem of a set, whatever layout it was read from, and the language it is in.

use deepsolve_core::Language;
use serde::{Deserialize, Serialize};

/// The record layouts the loader knows (see `data.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `question`, `answer` ending in `#### N`.
    Gsm8k,
    /// `problem`, `solution` (the answer in its last `\boxed{}`), optional `answer`, `level`,
    /// `type`.
    Math,
    /// The Qwen2.5-Math evaluation sets: a question (`question`, `problem` or `input`) and a
    /// reference (`gt`, `golden`, `final_answer`, `choice_answer`, `label`, `answer` or
    /// `target`), with `idx`/`id`, `level`, `type`, `subfield`, `grade`, `options`.
    Qwen,
    /// `{id, question, answer}` (optionally `level`, `subject`, `language`).
    Plain,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Gsm8k => "gsm8k",
            Layout::Math => "math",
            Layout::Qwen => "qwen",
            Layout::Plain => "plain",
        }
    }
}

/// One problem to solve, with the reference answer the grader compares against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// Unique within its set: the record's own id (`id`, `idx`, `unique_id`) or `line-N`.
    pub id: String,
    pub question: String,
    /// The reference final answer (for MATH, the last `\boxed{}` of the solution).
    pub expected: String,
    pub language: Language,
    pub level: Option<String>,
    pub subject: Option<String>,
    pub layout: Layout,
}

/// The language of a text: Chinese when CJK ideographs are a real part of it (at least two,
/// and at least a fifth as many as Latin letters), else English.
pub fn detect_language(text: &str) -> Language {
    let cjk = text.chars().filter(|c| is_cjk(*c)).count();
    let latin = text.chars().filter(char::is_ascii_alphabetic).count();
    if cjk >= 2 && cjk * 5 >= latin {
        Language::Zh
    } else {
        Language::En
    }
}

/// CJK Unified Ideographs (with extension A and the compatibility block) and CJK punctuation.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x3000..=0x303F | 0xFF00..=0xFFEF)
}
