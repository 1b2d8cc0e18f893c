//! Live filtering of streamed content: `<think>` goes to reasoning, tool-call markup and
//! invented `<tool_response>`s are never shown as answer text. Partial tags at a chunk
//! boundary are held back until they resolve. The markup is the reply parser's own table
//! ([`SECTIONS`]); the final text is re-read by `parse_reply` — this only keeps the live view
//! clean. Public for a model client that reads markup itself (the in-process local model).

use std::sync::LazyLock;

use crate::wire::markup::{FENCE, SECTIONS, SectionKind, THINK_CLOSE};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Reasoning(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Visible,
    Fenced,
    Think,
    Hidden(Option<&'static str>),
}

/// Bytes of a hidden call section kept to find the tool it names (which comes first in every
/// call format).
const CALL_HEAD_BYTES: usize = 256;

#[derive(Debug)]
pub struct VisibleFilter {
    buf: String,
    mode: Mode,
    /// The first bytes of the latest call section, and whether they grew since last read.
    call_head: String,
    head_grew: bool,
    /// The protocol's own openings of an invented result: nothing from one on is shown.
    cuts: &'static [&'static str],
}

impl Default for VisibleFilter {
    fn default() -> Self {
        VisibleFilter {
            buf: String::new(),
            mode: Mode::Visible,
            call_head: String::new(),
            head_grew: false,
            cuts: &[],
        }
    }
}

/// What opens a section, and the mode it starts.
#[derive(Debug, Clone, Copy)]
struct Opener {
    open: &'static str,
    mode: Mode,
}

/// Fenced code, and every markup section.
static OPENERS: LazyLock<Vec<Opener>> = LazyLock::new(|| {
    let sections = SECTIONS.iter().map(|s| Opener {
        open: s.open,
        mode: match s.kind {
            SectionKind::Think => Mode::Think,
            SectionKind::InventedResponse | SectionKind::Calls(_) => Mode::Hidden(s.close),
        },
    });
    let fence = Opener {
        open: FENCE,
        mode: Mode::Fenced,
    };
    std::iter::once(fence).chain(sections).collect()
});

/// The length of the longest suffix of `s` that is a proper prefix of one of `tokens`.
fn partial_suffix(s: &str, tokens: &[&str]) -> usize {
    tokens
        .iter()
        .flat_map(|t| {
            (1..t.len())
                .rev()
                .filter(|n| t.is_char_boundary(*n))
                .map(move |n| &t[..n])
        })
        .filter(|p| s.ends_with(p))
        .map(str::len)
        .max()
        .unwrap_or(0)
}

impl VisibleFilter {
    /// A filter that also hides everything from any of `cuts` on (a text protocol's opening
    /// of a result, such as an ```` ```output ```` fence), outside fenced code.
    pub fn cutting_at(cuts: &'static [&'static str]) -> Self {
        VisibleFilter {
            cuts,
            ..VisibleFilter::default()
        }
    }

    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out) {}
        out
    }

    /// The first bytes of the latest call section, when they grew since the last look.
    pub fn new_call_head(&mut self) -> Option<&str> {
        if !std::mem::take(&mut self.head_grew) {
            return None;
        }
        Some(&self.call_head)
    }

    /// Keep the start of a call section's hidden text, up to [`CALL_HEAD_BYTES`].
    fn keep_call_head(&mut self, end: usize) {
        let room = CALL_HEAD_BYTES
            .saturating_sub(self.call_head.len())
            .min(end);
        let cut = (0..=room)
            .rev()
            .find(|n| self.buf.is_char_boundary(*n))
            .unwrap_or(0);
        if cut > 0 {
            self.call_head.push_str(&self.buf[..cut]);
            self.head_grew = true;
        }
    }

    /// Flush at the end of the stream: held-back text that never became a tag is shown.
    pub fn finish(&mut self) -> Vec<Piece> {
        let rest = std::mem::take(&mut self.buf);
        match self.mode {
            Mode::Visible | Mode::Fenced if !rest.is_empty() => vec![Piece::Text(rest)],
            Mode::Think if !rest.is_empty() => vec![Piece::Reasoning(rest)],
            _ => Vec::new(),
        }
    }

    /// Consume what can be decided now; true when the mode changed and the rest should be
    /// looked at again.
    fn step(&mut self, out: &mut Vec<Piece>) -> bool {
        match self.mode {
            Mode::Visible => self.visible(out),
            Mode::Fenced => self.until(FENCE, Mode::Visible, out, Piece::Text, true),
            Mode::Think => self.until(THINK_CLOSE, Mode::Visible, out, Piece::Reasoning, false),
            Mode::Hidden(None) => {
                self.buf.clear();
                false
            }
            Mode::Hidden(Some(close)) => self.until(
                close,
                Mode::Visible,
                out,
                |_| Piece::Text(String::new()),
                false,
            ),
        }
    }

    fn visible(&mut self, out: &mut Vec<Piece>) -> bool {
        let first = OPENERS
            .iter()
            .filter_map(|o| self.buf.find(o.open).map(|i| (i, o)))
            .min_by_key(|(i, _)| *i);
        let cut = self.cuts.iter().filter_map(|c| self.buf.find(c)).min();
        if let Some(at) = cut
            && first.is_none_or(|(i, _)| at <= i)
        {
            emit(out, Piece::Text(self.buf[..at].to_string()));
            self.buf.clear();
            self.mode = Mode::Hidden(None);
            return false;
        }
        // An opening that may still grow into a cut (```` ``` ```` of ```` ```output ````): wait.
        if let Some((i, _)) = first
            && self
                .cuts
                .iter()
                .any(|c| c.len() > self.buf.len() - i && c.starts_with(&self.buf[i..]))
        {
            emit(out, Piece::Text(self.buf[..i].to_string()));
            self.buf.drain(..i);
            return false;
        }
        if let Some((i, opener)) = first {
            let keep_opener = opener.mode == Mode::Fenced;
            let end = if keep_opener {
                i + opener.open.len()
            } else {
                i
            };
            emit(out, Piece::Text(self.buf[..end].to_string()));
            self.buf.drain(..i + opener.open.len());
            self.mode = opener.mode;
            if matches!(self.mode, Mode::Hidden(Some(_))) {
                self.call_head.clear();
            }
            return true;
        }
        let tokens: Vec<&str> = OPENERS
            .iter()
            .map(|o| o.open)
            .chain(self.cuts.iter().copied())
            .collect();
        let hold = partial_suffix(&self.buf, &tokens);
        let ready = self.buf.len() - hold;
        emit(out, Piece::Text(self.buf[..ready].to_string()));
        self.buf.drain(..ready);
        false
    }

    /// Emit (or drop) text until `close`; then switch to `next`.
    fn until(
        &mut self,
        close: &'static str,
        next: Mode,
        out: &mut Vec<Piece>,
        piece: fn(String) -> Piece,
        keep_close: bool,
    ) -> bool {
        let in_call = matches!(self.mode, Mode::Hidden(Some(_)));
        if let Some(i) = self.buf.find(close) {
            let end = if keep_close { i + close.len() } else { i };
            if in_call {
                self.keep_call_head(end);
            }
            emit(out, piece(self.buf[..end].to_string()));
            self.buf.drain(..i + close.len());
            self.mode = next;
            return true;
        }
        let hold = partial_suffix(&self.buf, &[close]);
        let ready = self.buf.len() - hold;
        if in_call {
            self.keep_call_head(ready);
        }
        emit(out, piece(self.buf[..ready].to_string()));
        self.buf.drain(..ready);
        false
    }
}

fn emit(out: &mut Vec<Piece>, piece: Piece) {
    match &piece {
        Piece::Text(t) | Piece::Reasoning(t) if t.is_empty() => {}
        _ => out.push(piece),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A protocol's cut hides the invented output however the stream splits it; the code
    /// block before it stays visible.
    #[test]
    fn a_protocols_cut_hides_everything_after_it() {
        let reply = "Run:\n```python\nprint(1)\n```\n```output\nINVENTED\n```\nSo INVENTED.";
        for split in 1..reply.len() {
            if !reply.is_char_boundary(split) {
                continue;
            }
            let mut f = VisibleFilter::cutting_at(&["```output"]);
            let mut pieces = f.push(&reply[..split]);
            pieces.extend(f.push(&reply[split..]));
            pieces.extend(f.finish());
            let shown: String = pieces
                .iter()
                .filter_map(|p| match p {
                    Piece::Text(t) => Some(t.as_str()),
                    Piece::Reasoning(_) => None,
                })
                .collect();
            assert_eq!(
                shown, "Run:\n```python\nprint(1)\n```\n",
                "split at {split}"
            );
        }
    }

    fn run(chunks: &[&str]) -> (String, String) {
        let mut f = VisibleFilter::default();
        let mut pieces: Vec<Piece> = chunks.iter().flat_map(|c| f.push(c)).collect();
        pieces.extend(f.finish());
        let mut text = String::new();
        let mut reasoning = String::new();
        for p in pieces {
            match p {
                Piece::Text(t) => text.push_str(&t),
                Piece::Reasoning(r) => reasoning.push_str(&r),
            }
        }
        (text, reasoning)
    }

    #[test]
    fn think_and_calls_are_hidden_across_chunk_boundaries() {
        let (text, reasoning) = run(&[
            "Hi <thi",
            "nk>plan it</th",
            "ink>ok <tool_",
            "call>{\"name\":1}</tool_call> done",
        ]);
        assert_eq!(text, "Hi ok  done");
        assert_eq!(reasoning, "plan it");
    }

    #[test]
    fn a_call_section_keeps_its_head_for_the_announcer() {
        let mut f = VisibleFilter::default();
        f.push("thinking <tool_ca");
        assert_eq!(f.new_call_head(), None);
        f.push("ll>{\"name\": \"code_ex");
        assert_eq!(f.new_call_head(), Some("{\"name\": \"code_ex"));
        assert_eq!(f.new_call_head(), None, "read once");
        f.push(&format!(
            "ecution\", \"arguments\": {{\"code\": \"{}",
            "x".repeat(400)
        ));
        let head = f.new_call_head().map(str::to_string).unwrap_or_default();
        assert!(head.starts_with("{\"name\": \"code_execution\""));
        assert_eq!(head.len(), CALL_HEAD_BYTES);
        f.push("\"}}</tool_call> done <tool_call>{\"name\": \"exec\"");
        assert_eq!(f.new_call_head(), Some("{\"name\": \"exec\""));
    }

    #[test]
    fn invented_responses_hide_everything_after() {
        let (text, _) = run(&["answer <tool_res", "ponse>FAKE</tool_response> more"]);
        assert_eq!(text, "answer ");
    }

    #[test]
    fn fenced_tags_stay_visible_and_a_lone_angle_bracket_is_flushed() {
        let (text, _) = run(&["```\n<tool_call>x</tool_call>\n```", " a <", "b"]);
        assert_eq!(text, "```\n<tool_call>x</tool_call>\n``` a <b");
        let (tail, _) = run(&["x <"]);
        assert_eq!(tail, "x <");
    }

    proptest! {
        #[test]
        fn chunking_does_not_change_the_result(s in "(a|b| |<think>|</think>|<tool_call>|</tool_call>|```|<|>){0,40}", cuts in prop::collection::vec(0usize..200, 0..6)) {
            let whole = run(&[s.as_str()]);
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (s.len() + 1)).filter(|c| s.is_char_boundary(*c)).collect();
            points.sort();
            points.dedup();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points { chunks.push(&s[last..p]); last = p; }
            chunks.push(&s[last..]);
            prop_assert_eq!(run(&chunks), whole);
        }
    }
}
