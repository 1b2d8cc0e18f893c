//! Token estimates for context accounting: what the next request will cost before it is sent.
//!
//! A single pass over the text by character class — no vocabulary, nothing to load, no
//! allocation — calibrated against o200k (the tokenizer of current OpenAI models; other
//! families differ, which is why usage counted here is marked `estimated`). It follows the
//! shape of o200k's pre-tokenizer: a word with the space or mark before it, numbers in groups
//! of up to three digits, runs of punctuation, runs of whitespace, CJK about a token a
//! character. Where it must guess it guesses high: an over-estimate only compacts a little
//! early, an under-estimate sends a request the provider refuses. Runs of letters far longer
//! than words (model output is untrusted: base64, hex, a letter repeated) are charged as
//! random text, the worst case for a BPE vocabulary.

use crate::message::Message;

/// Per-message framing overhead in OpenAI's accounting.
const PER_MESSAGE: u64 = 4;
/// Framing of one tool call (id, type, function wrapper).
const PER_CALL: u64 = 8;

/// What one image part is charged, whatever its size. Providers count images their own way
/// (OpenAI's high detail: at most 1 445 for an image of up to 2 048 px; Anthropic: up to about
/// 1 600; DashScope's Qwen-VL: 1 280 by default): a fixed figure near the top of that range
/// errs high, as the text estimate does, and the provider's reported usage corrects it after
/// the first call. Images are at most 2 048 px on their long side when they reach the engine.
pub const IMAGE_TOKENS: u64 = 1_500;

/// Costs are summed in eighths of a token and rounded up at the end.
const UNIT: u64 = 8;

/// Eighths of a token for an ASCII word of `len` letters (index 0 unused). English words up to
/// six or seven letters are one token; longer ones split in two or three.
const WORD_COST: [u64; 13] = [0, 8, 8, 8, 8, 8, 8, 9, 11, 13, 15, 17, 20];
/// Past the table, eighths of a token per further letter: random letters, the worst case,
/// average under two letters a token in o200k.
const LONG_WORD_PER_LETTER: u64 = 5;
/// Eighths per letter, at least, of a word glued to the letters or digits before it (a case
/// change, as in base64 or `camelCase`): such pieces are rarely whole words.
const GLUED_PER_LETTER: u64 = 4;
/// Eighths per character of punctuation in a run (common pairs like `",` or `\(` merge).
const PUNCT_PER_CHAR: u64 = 4;
/// Eighths per CJK character: a token each, less where common words of two merge.
const CJK_PER_CHAR: u64 = 6;
/// Eighths per letter of another script (Cyrillic, Greek, accented Latin…).
const OTHER_LETTER_PER_CHAR: u64 = 4;
/// Eighths per UTF-8 byte of any other character (emoji, symbols, rare scripts): byte-level
/// tokens at worst.
const OTHER_PER_BYTE: u64 = 4;
/// A run of whitespace is one token up to this many characters (indentation, blank lines).
const WHITESPACE_PER_TOKEN: u64 = 16;

/// What a character is, for the estimate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Lower,
    Upper,
    Digit,
    Space,
    Newline,
    Punct,
    Cjk,
    OtherLetter,
    /// With its length in UTF-8 bytes.
    Other(u8),
}

fn classify(c: char) -> Class {
    match c {
        'a'..='z' => Class::Lower,
        'A'..='Z' => Class::Upper,
        '0'..='9' => Class::Digit,
        ' ' | '\t' => Class::Space,
        '\n' | '\r' => Class::Newline,
        c if c.is_ascii() => {
            if c.is_ascii_whitespace() {
                Class::Space
            } else {
                Class::Punct
            }
        }
        c if is_cjk(c) => Class::Cjk,
        c if c.is_alphabetic() => Class::OtherLetter,
        c if c.is_whitespace() => Class::Space,
        c => Class::Other(c.len_utf8() as u8),
    }
}

/// CJK ideographs, kana, hangul and the CJK punctuation and full-width forms.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x9FFF | 0xA960..=0xA97F | 0xAC00..=0xD7FF | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F | 0xFF00..=0xFFEF)
}

/// The run being read and what has been counted before it.
#[derive(Default)]
struct Estimator {
    eighths: u64,
    /// Letters in the current ASCII word.
    word: u64,
    /// The current word has had a lowercase letter (an uppercase one after it starts a new
    /// word, as `camelCase` splits).
    word_lower: bool,
    /// The current word follows letters or digits without a break.
    word_glued: bool,
    digits: u64,
    punct: u64,
    spaces: u64,
    newline: bool,
}

impl Estimator {
    fn push(&mut self, class: Class) {
        match class {
            Class::Lower => {
                self.start_word(false);
                self.word += 1;
                self.word_lower = true;
            }
            Class::Upper => {
                self.start_word(self.word_lower);
                self.word += 1;
            }
            Class::Digit => {
                self.end_word();
                self.end_punct();
                self.end_spaces();
                self.digits += 1;
            }
            Class::Space | Class::Newline => {
                self.end_word();
                self.end_digits();
                self.end_punct();
                self.spaces += 1;
                self.newline |= class == Class::Newline;
            }
            Class::Punct => {
                self.end_word();
                self.end_digits();
                self.end_spaces();
                self.punct += 1;
            }
            Class::Cjk => self.single(CJK_PER_CHAR),
            Class::OtherLetter => self.single(OTHER_LETTER_PER_CHAR),
            Class::Other(bytes) => self.single(u64::from(bytes) * OTHER_PER_BYTE),
        }
    }

    /// One more character of the run the last one was in; false when it is counted on its
    /// own (the same as `push`, only without ending runs that are not there).
    fn extend(&mut self, class: Class) -> bool {
        let counter = match class {
            Class::Lower => &mut self.word,
            Class::Upper if !self.word_lower => &mut self.word,
            Class::Digit => &mut self.digits,
            Class::Space | Class::Newline => &mut self.spaces,
            Class::Punct => &mut self.punct,
            _ => return false,
        };
        *counter += 1;
        true
    }

    /// A character counted on its own.
    fn single(&mut self, eighths: u64) {
        self.end_all();
        self.eighths += eighths;
    }

    /// Before a letter: `split` ends the current word (a case change); a word starting right
    /// after letters or digits is glued to them.
    fn start_word(&mut self, split: bool) {
        if split {
            self.end_word();
            self.word_glued = true;
        } else if self.word == 0 && self.digits > 0 {
            self.word_glued = true;
        }
        self.end_non_word();
    }

    /// Before a letter: a single space or mark joins the word; longer runs are their own.
    fn end_non_word(&mut self) {
        self.end_digits();
        if self.spaces == 1 && !self.newline {
            self.spaces = 0;
        }
        if self.punct == 1 {
            // A mark before a word (`(x`, `\frac`, `.get`) merges with it about half the time.
            self.eighths += UNIT / 2;
            self.punct = 0;
        }
        self.end_punct();
        self.end_spaces();
    }

    fn end_word(&mut self) {
        if self.word > 0 {
            let cost = word_cost(self.word);
            self.eighths += if self.word_glued {
                cost.max(self.word * GLUED_PER_LETTER)
            } else {
                cost
            };
        }
        self.word = 0;
        self.word_lower = false;
        self.word_glued = false;
    }

    fn end_digits(&mut self) {
        self.eighths += self.digits.div_ceil(3) * UNIT;
        self.digits = 0;
    }

    fn end_punct(&mut self) {
        if self.punct > 0 {
            self.eighths += (self.punct * PUNCT_PER_CHAR).max(UNIT);
        }
        self.punct = 0;
    }

    fn end_spaces(&mut self) {
        if self.spaces > 0 {
            self.eighths += self.spaces.div_ceil(WHITESPACE_PER_TOKEN) * UNIT;
        }
        self.spaces = 0;
        self.newline = false;
    }

    fn end_all(&mut self) {
        self.end_word();
        self.end_digits();
        self.end_punct();
        self.end_spaces();
    }

    fn tokens(mut self) -> u64 {
        self.end_all();
        self.eighths.div_ceil(UNIT)
    }
}

fn word_cost(len: u64) -> u64 {
    let last = WORD_COST.len() as u64 - 1;
    match WORD_COST.get(len as usize) {
        Some(&cost) => cost,
        None => WORD_COST[last as usize] + (len - last) * LONG_WORD_PER_LETTER,
    }
}

/// Estimated tokens in a text.
pub fn count(text: &str) -> u64 {
    let mut estimator = Estimator::default();
    let mut last = None;
    for c in text.chars() {
        let class = classify(c);
        // Most characters continue the run before them: a counter goes up, nothing ends.
        if last == Some(class) && estimator.extend(class) {
            continue;
        }
        estimator.push(class);
        last = Some(class);
    }
    estimator.tokens()
}

/// Tokens a message adds to a prompt: its content, its tool calls and the reasoning sent back
/// with them.
pub fn message_tokens(m: &Message) -> u64 {
    let calls: u64 = m
        .tool_calls
        .iter()
        .map(|c| count(&c.name) + count(&c.arguments) + PER_CALL)
        .sum();
    let reasoning = m.reasoning_content.as_deref().map_or(0, count);
    let images = IMAGE_TOKENS * m.images.len() as u64;
    PER_MESSAGE + count(&m.content) + reasoning + calls + images
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_costs_its_fixed_estimate() {
        let text = Message::user("Find angle C.");
        let image = crate::image::TurnImage {
            id: "image_1".into(),
            name: "a.png".into(),
            mime: "image/png".into(),
            width: 2048,
            height: 1024,
            bytes: std::sync::Arc::from(&b"\x89PNG"[..]),
        };
        let with = Message::user_with_images("Find angle C.", vec![image.clone(), image].into());
        assert_eq!(
            message_tokens(&with),
            message_tokens(&text) + 2 * IMAGE_TOKENS
        );
    }

    /// Exact o200k counts, measured once with tiktoken. The bench crate's test checks the
    /// estimate against the tokenizer itself on the repository's texts, per kind.
    const MEASURED: &[(&str, u64)] = &[
        ("The quick brown fox jumps over the lazy dog.", 10),
        (
            "Call `solve_plan` first: analyse the problem in a sentence or two, then give the ordered steps, each a short imperative goal.",
            28,
        ),
        (
            "By the quadratic formula, $x = \\frac{-b \\pm \\sqrt{b^2 - 4ac}}{2a} = \\frac{5 \\pm 1}{2}$, so $x \\in \\{2, 3\\}$.",
            56,
        ),
        (
            "import sympy as sp\n\nx = sp.symbols('x')\nroots = sp.solve(x**2 - 5*x + 6, x)\nprint(roots)\n",
            35,
        ),
        (
            "{\"code\": \"import sympy as sp\\nx = sp.symbols('x')\\nprint(sp.solve(x**2 - 5*x + 6, x))\", \"timeout_s\": 30}",
            44,
        ),
        (
            "先规划。在做任何其他工作之前，先调用工具：用一两句话分析题目，并给出有序的步骤列表。",
            29,
        ),
        (
            "数学内容用 Markdown 和 LaTeX（`$...$`）书写。Be precise: exact values first, decimals only as approximations.",
            31,
        ),
    ];

    #[test]
    fn estimates_are_near_the_measured_counts_and_rather_above() {
        for &(text, exact) in MEASURED {
            let estimate = count(text);
            assert!(
                estimate * 10 >= exact * 9 && estimate * 10 <= exact * 14,
                "{estimate} estimated, {exact} exact: {text}"
            );
        }
    }

    #[test]
    fn nothing_costs_nothing_and_framing_is_counted() {
        assert_eq!(count(""), 0);
        assert_eq!(message_tokens(&Message::user("")), PER_MESSAGE);
    }

    /// Model output is untrusted: a run of letters far longer than a word is charged as
    /// random letters (o200k: under two letters a token), never as one word.
    #[test]
    fn a_long_run_of_letters_is_charged_as_random_text() {
        let run = "q".repeat(1 << 20);
        assert!(count(&run) >= (1 << 20) / 2, "{}", count(&run));
    }

    #[test]
    fn reasoning_sent_back_is_counted() {
        let call = crate::message::ToolCall {
            id: "c1".into(),
            name: "solve_plan".into(),
            arguments: "{}".into(),
        };
        let bare = Message::assistant_with_calls("", vec![call.clone()], None);
        let thought = "Let me factor the quadratic first. ".repeat(10);
        let with = Message::assistant_with_calls("", vec![call], Some(thought.clone()));
        assert_eq!(
            message_tokens(&with),
            message_tokens(&bare) + count(&thought)
        );
    }
}
