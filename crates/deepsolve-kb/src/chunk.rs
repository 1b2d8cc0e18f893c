//! Pages into overlapping passages a solve can cite.
//!
//! text-splitter does the splitting: at the coarsest boundary that keeps a chunk within the
//! token budget — Markdown sections, then paragraphs, then sentences (Unicode sentence
//! segmentation, so `。！？` end Chinese sentences without spaces), then words and characters.
//! Sizes are counted with the agent's own token estimator, the same count its context
//! accounting uses. A chunk never crosses a page, so its page number is exact; its heading path
//! is the Markdown headings in force where its own text starts (DOCX and HTML arrive as
//! Markdown).

use text_splitter::{ChunkCharIndex, ChunkConfig, ChunkSizer, MarkdownSplitter, TextSplitter};

use crate::extract::{Extracted, Markup};

/// The chunker's budget, in estimated tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Largest chunk.
    pub max_tokens: usize,
    /// How much of the previous chunk's end a chunk repeats, so a sentence cut at a boundary is
    /// whole in one of the two.
    pub overlap_tokens: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            max_tokens: 512,
            overlap_tokens: 64,
        }
    }
}

/// One passage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 0-based position in the document, in reading order.
    pub ordinal: u32,
    /// The page the passage is on (1-based).
    pub page: u32,
    /// The headings in force at the passage's start, outermost first.
    pub heading_path: Vec<String>,
    /// Where the passage is in its page's text, in characters (start inclusive, end exclusive).
    pub char_start: usize,
    pub char_end: usize,
    pub text: String,
    /// Its size by the token estimator.
    pub tokens: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    #[error("chunk options {0:?}: the overlap must be smaller than the chunk")]
    OverlapTooLarge(ChunkOptions),
}

/// Counts with `deepsolve_core`'s estimator, which guesses high: a chunk it fits is not larger
/// than that for the models.
struct Tokens;

impl ChunkSizer for Tokens {
    fn size(&self, chunk: &str) -> usize {
        usize::try_from(deepsolve_core::count_tokens(chunk)).unwrap_or(usize::MAX)
    }
}

/// The chunks of a document, deterministic for the same input and options.
///
/// text-splitter overlaps chunks only at the level it split them at, so chunks made of whole
/// paragraphs would not overlap at all. Instead it cuts cores of `max - overlap` tokens without
/// overlap, and each core after the first on a page is extended backwards by the last whole
/// sentences (else words, else characters) of the text before it that fit in `overlap`. A
/// core that opens a section (starts with a heading) repeats nothing: no sentence was cut.
pub fn chunk(doc: &Extracted, options: &ChunkOptions) -> Result<Vec<Chunk>, ChunkError> {
    let core_tokens = options.max_tokens.saturating_sub(options.overlap_tokens);
    if core_tokens == 0 {
        return Err(ChunkError::OverlapTooLarge(*options));
    }
    let config = ChunkConfig::new(core_tokens).with_sizer(Tokens);
    let splitter = match doc.markup {
        Markup::Markdown => Splitter::Markdown(MarkdownSplitter::new(config)),
        Markup::Plain => Splitter::Text(TextSplitter::new(config)),
    };
    let mut headings = HeadingPath::default();
    let mut chunks = Vec::new();
    for page in &doc.pages {
        let text = page.text.as_str();
        let marks = match doc.markup {
            Markup::Markdown => heading_marks(text),
            Markup::Plain => Vec::new(),
        };
        let mut marks = marks.into_iter().peekable();
        let mut previous_core = None;
        for core in cores(text, splitter.pieces(text), doc.markup, options.max_tokens) {
            let core_text = &text[core.byte..core.end];
            let content = core.byte + content_offset(core_text);
            while let Some(mark) = marks.next_if(|m| m.byte <= content) {
                headings.enter(mark.level, mark.title);
            }
            let opens_section = doc.markup == Markup::Markdown
                && core_text
                    .lines()
                    .next()
                    .is_some_and(|l| atx_heading(l).is_some());
            let start = match previous_core {
                Some(floor) if !opens_section => {
                    overlap_start(text, floor, core.byte, core.end, options)
                }
                _ => core.byte,
            };
            previous_core = Some(core.byte);
            let body = &text[start..core.end];
            let char_start = core.char - text[start..core.byte].chars().count();
            chunks.push(Chunk {
                ordinal: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
                page: page.number,
                heading_path: headings.path(),
                char_start,
                char_end: char_start + body.chars().count(),
                text: body.to_owned(),
                tokens: u32::try_from(Tokens.size(body)).unwrap_or(u32::MAX),
            });
        }
        // Headings after the last chunk's start still open sections on the next page.
        for mark in marks {
            headings.enter(mark.level, mark.title);
        }
    }
    Ok(chunks)
}

/// Where a chunk whose core is `core..end` starts once it repeats the end of the text before
/// it (never before `floor`, the previous core's start): the earliest boundary of the
/// finest kind that has one, such that the repeated part fits the overlap and the whole chunk
/// the maximum. The core alone when nothing fits.
fn overlap_start(
    text: &str,
    floor: usize,
    core: usize,
    end: usize,
    options: &ChunkOptions,
) -> usize {
    let before = &text[..core];
    let fits = |b: usize| {
        Tokens.size(&text[b..core]) <= options.overlap_tokens
            && Tokens.size(&text[b..end]) <= options.max_tokens
    };
    for boundaries in [
        sentence_starts(before, floor),
        word_starts(before, floor),
        char_starts(before, floor),
    ] {
        // Boundaries run backwards from the core; the repeated part only grows.
        let best = boundaries.into_iter().take_while(|&b| fits(b)).last();
        if let Some(b) = best {
            return b;
        }
    }
    core
}

/// Byte offsets (descending, each ≥ `floor` and before the end) where a sentence starts: after
/// `.`, `!`, `?` and whitespace, right after `。！？`, or at a line's start.
fn sentence_starts(text: &str, floor: usize) -> Vec<usize> {
    let chars: Vec<(usize, char)> = text[floor..].char_indices().collect();
    let mut starts: Vec<usize> = chars
        .windows(2)
        .filter(|w| {
            let (c, next) = (w[0].1, w[1].1);
            matches!(c, '。' | '！' | '？' | '\n')
                || (matches!(c, '.' | '!' | '?') && next.is_whitespace())
        })
        .filter_map(|w| {
            // The sentence starts at its first non-space character.
            let after = floor + w[1].0;
            let rest = &text[after..];
            let start = after + (rest.len() - rest.trim_start().len());
            (start < text.len()).then_some(start)
        })
        .collect();
    starts.dedup();
    starts.reverse();
    starts
}

/// Byte offsets (descending) where a word starts after whitespace.
fn word_starts(text: &str, floor: usize) -> Vec<usize> {
    let mut starts: Vec<usize> = text[floor..]
        .char_indices()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0].1.is_whitespace() && !w[1].1.is_whitespace())
        .map(|w| w[1].0 + floor)
        .collect();
    starts.reverse();
    starts
}

/// Every character's offset (descending): the last resort for text without spaces.
fn char_starts(text: &str, floor: usize) -> Vec<usize> {
    let mut starts: Vec<usize> = text[floor..]
        .char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .map(|(i, _)| i + floor)
        .collect();
    starts.reverse();
    starts
}

/// A chunk's own text before any overlap: byte range, and its start in characters.
struct Core {
    byte: usize,
    char: usize,
    end: usize,
}

/// The splitter's pieces as cores, a piece of nothing but headings joined to the piece after it
/// (the splitter cuts a heading off when its section does not fit; alone it is no passage).
fn cores(text: &str, pieces: Vec<ChunkCharIndex<'_>>, markup: Markup, max: usize) -> Vec<Core> {
    let mut cores: Vec<Core> = Vec::new();
    for piece in pieces {
        let end = piece.byte_offset + piece.chunk.len();
        match cores.last_mut() {
            Some(last)
                if markup == Markup::Markdown
                    && headings_only(&text[last.byte..last.end])
                    && Tokens.size(&text[last.byte..end]) <= max =>
            {
                last.end = end;
            }
            _ => cores.push(Core {
                byte: piece.byte_offset,
                char: piece.char_offset,
                end,
            }),
        }
    }
    cores
}

fn headings_only(text: &str) -> bool {
    text.lines()
        .all(|l| l.trim().is_empty() || atx_heading(l).is_some())
}

enum Splitter {
    Markdown(MarkdownSplitter<Tokens>),
    Text(TextSplitter<Tokens>),
}

impl Splitter {
    fn pieces<'t>(&'t self, text: &'t str) -> Vec<ChunkCharIndex<'t>> {
        match self {
            Splitter::Markdown(s) => s.chunk_char_indices(text).collect(),
            Splitter::Text(s) => s.chunk_char_indices(text).collect(),
        }
    }
}

/// Where a chunk's first line of text is, past the headings and blank lines it opens with: the
/// headings before it are the chunk's own (a chunk opening with `# A` and `## B` is under B).
fn content_offset(chunk: &str) -> usize {
    let mut offset = 0;
    for line in chunk.split_inclusive('\n') {
        if !line.trim().is_empty() && atx_heading(line).is_none() {
            return offset;
        }
        offset += line.len();
    }
    offset
}

/// The open headings, as a stack by level.
#[derive(Default)]
struct HeadingPath(Vec<(usize, String)>);

impl HeadingPath {
    fn enter(&mut self, level: usize, title: String) {
        self.0.retain(|(l, _)| *l < level);
        self.0.push((level, title));
    }

    fn path(&self) -> Vec<String> {
        self.0.iter().map(|(_, t)| t.clone()).collect()
    }
}

/// A heading and the byte offset of its line.
struct Mark {
    byte: usize,
    level: usize,
    title: String,
}

/// The ATX headings of a Markdown text, outside fenced code (where `#` is a comment).
fn heading_marks(text: &str) -> Vec<Mark> {
    let mut marks = Vec::new();
    let mut fence: Option<&str> = None;
    let mut byte = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let opener = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        match (fence, opener) {
            (None, Some(f)) => fence = Some(f),
            (Some(open), Some(f)) if open == f => fence = None,
            (None, None) => {
                if let Some((level, title)) = atx_heading(line) {
                    marks.push(Mark {
                        byte,
                        level,
                        title: title.to_owned(),
                    });
                }
            }
            _ => {}
        }
        byte += line.len();
    }
    marks
}

/// `## Title ##` → `(2, "Title")`: up to three spaces of indent, one to six `#`, then a space
/// (or nothing); closing `#`s dropped.
pub(crate) fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let line = line.trim_end();
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    let after = &rest[level..];
    if !(1..=6).contains(&level) || !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let title = after.trim().trim_end_matches('#').trim_end();
    (!title.is_empty()).then_some((level, title))
}
