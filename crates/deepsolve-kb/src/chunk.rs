//! Pages into overlapping passages a solve can cite.
//!
//! text-splitter does the splitting: at the coarsest boundary that keeps a chunk within the
//! token budget — Markdown sections, then paragraphs, then sentences (Unicode sentence
//! segmentation, so `。！？` end Chinese sentences without spaces), then words and characters.
//! Sizes are counted with the agent's own token estimator, the same count its context
//! accounting uses. A chunk never crosses a page, so its page number is exact; its heading path
//! is the Markdown headings in force where its own text starts (DOCX and HTML arrive as
//! Markdown).
//!
//! The work is linear in the page's size whatever its content. text-splitter looks at the
//! whole rest of its text for every chunk it makes (the first sentence of a text without a
//! sentence end is all of it), so it is given a window of at most [`WINDOW_BYTES`] at a time,
//! cut at the coarsest break near the window's end. A run of more than [`RUN_CHARS`]
//! characters without a break (a base64 image pasted into Markdown) never reaches it: such a
//! run is cut at a hard bound — by characters, then by its tokens counted once — so the token
//! counter reads each part of it a bounded number of times.

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
    /// The caller's stop check said stop (its deadline passed, or the document was deleted).
    #[error("stopped before the end of the document")]
    Stopped,
}

/// The most text text-splitter sees at once, in bytes: a window's cost grows with its size
/// squared at worst, so a bounded window keeps the whole linear.
pub const WINDOW_BYTES: usize = 32 * 1024;

/// Longest run of characters without a break (whitespace, a CJK sentence or clause mark)
/// given to text-splitter; longer runs are cut at a hard bound.
pub const RUN_CHARS: usize = 2_048;

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
    chunk_until(doc, options, &|| false)
}

/// [`chunk`], asking `stop` between pieces of at most [`WINDOW_BYTES`] (a few milliseconds of
/// work each): when it says stop, [`ChunkError::Stopped`].
pub fn chunk_until(
    doc: &Extracted,
    options: &ChunkOptions,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Chunk>, ChunkError> {
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
        let pieces = pieces(text, &splitter, core_tokens, stop)?;
        for core in cores(text, pieces, doc.markup, options.max_tokens) {
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
        // Boundaries run backwards from the core; the repeated part only grows, so the ones
        // that fit are a prefix, found by bisection (a run's every character is a boundary).
        if let Some(b) = last_fitting(&boundaries, fits) {
            return b;
        }
    }
    core
}

/// The last of `boundaries` for which `fits` holds, when it holds for a prefix of them; only
/// a boundary `fits` was asked about is returned.
fn last_fitting(boundaries: &[usize], fits: impl Fn(usize) -> bool) -> Option<usize> {
    let (mut low, mut high) = (0, boundaries.len());
    let mut best = None;
    while low < high {
        let mid = low + (high - low) / 2;
        if fits(boundaries[mid]) {
            best = Some(boundaries[mid]);
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    best
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

/// The pieces as cores, a piece of nothing but headings joined to the piece after it (the
/// splitter cuts a heading off when its section does not fit; alone it is no passage).
fn cores(text: &str, pieces: Vec<Core>, markup: Markup, max: usize) -> Vec<Core> {
    let mut cores: Vec<Core> = Vec::new();
    for piece in pieces {
        match cores.last_mut() {
            Some(last)
                if markup == Markup::Markdown
                    && headings_only(&text[last.byte..last.end])
                    && Tokens.size(&text[last.byte..piece.end]) <= max =>
            {
                last.end = piece.end;
            }
            _ => cores.push(piece),
        }
    }
    cores
}

/// A stretch of a page: text for text-splitter, or a run without breaks to cut by size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stretch {
    Prose { start: usize, end: usize },
    Run { start: usize, end: usize },
}

/// Whether `c` is a place text may be split at: whitespace, or a CJK sentence or clause mark
/// (Chinese has no spaces; its sentences end at `。`).
fn is_break(c: char) -> bool {
    c.is_whitespace() || matches!(c, '。' | '！' | '？' | '，' | '、' | '；' | '：')
}

/// The page as prose and the runs of more than [`RUN_CHARS`] characters without a break, in
/// order, covering it; one pass, asking `stop` every [`WINDOW_BYTES`].
fn stretches(text: &str, stop: &dyn Fn() -> bool) -> Result<Vec<Stretch>, ChunkError> {
    let mut out = Vec::new();
    let mut next_check = WINDOW_BYTES;
    let mut prose_start = 0;
    // The current run without breaks: its start byte and length in characters.
    let mut run: Option<(usize, usize)> = None;
    for (i, c) in text.char_indices() {
        if i >= next_check {
            if stop() {
                return Err(ChunkError::Stopped);
            }
            next_check = i + WINDOW_BYTES;
        }
        if is_break(c) {
            if let Some(r) = run.take() {
                prose_start = close_run(&mut out, r, i, prose_start);
            }
        } else {
            match &mut run {
                Some((_, chars)) => *chars += 1,
                None => run = Some((i, 1)),
            }
        }
    }
    if let Some(r) = run.take() {
        prose_start = close_run(&mut out, r, text.len(), prose_start);
    }
    if prose_start < text.len() {
        out.push(Stretch::Prose {
            start: prose_start,
            end: text.len(),
        });
    }
    Ok(out)
}

/// Records the run `(start, chars)` ending at `end` when it is too long for text-splitter,
/// after the prose since `from`; where the prose now starts.
fn close_run(out: &mut Vec<Stretch>, run: (usize, usize), end: usize, from: usize) -> usize {
    let (start, chars) = run;
    if chars <= RUN_CHARS {
        return from;
    }
    if start > from {
        out.push(Stretch::Prose {
            start: from,
            end: start,
        });
    }
    out.push(Stretch::Run { start, end });
    end
}

/// Where to end a window of prose starting at `start` (before `end`): the last paragraph
/// break in its second half, else the last line break, else the last sentence end, else the
/// last break of any kind; at most [`WINDOW_BYTES`] on. A stretch of prose has a break at
/// least every [`RUN_CHARS`] characters, so one is always found in the second half.
fn window_end(text: &str, start: usize, end: usize) -> usize {
    if end - start <= WINDOW_BYTES {
        return end;
    }
    let hard = floor_char_boundary(text, start + WINDOW_BYTES);
    let half = floor_char_boundary(text, start + WINDOW_BYTES / 2);
    let window = &text[half..hard];
    let after = |i: usize, len: usize| half + i + len;
    if let Some(i) = window.rfind("\n\n") {
        return after(i, 2);
    }
    if let Some(i) = window.rfind('\n') {
        return after(i, 1);
    }
    if let Some(i) = window.rfind(". ") {
        return after(i, 2);
    }
    if let Some((i, c)) = window.char_indices().rev().find(|(_, c)| is_break(*c)) {
        return after(i, c.len_utf8());
    }
    hard
}

/// The largest character boundary at or before `i`.
fn floor_char_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The page's pieces in order: text-splitter's, window by window, and the cut runs'. `stop`
/// is asked before each window and each run's part.
fn pieces(
    text: &str,
    splitter: &Splitter,
    core_tokens: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Core>, ChunkError> {
    let mut out = Vec::new();
    // Characters before `counted`, carried along so offsets cost one pass.
    let (mut counted, mut chars) = (0, 0);
    let mut char_at = |byte: usize| {
        chars += text[counted..byte].chars().count();
        counted = byte;
        chars
    };
    for stretch in stretches(text, stop)? {
        match stretch {
            Stretch::Prose { start, end } => {
                let mut from = start;
                while from < end {
                    if stop() {
                        return Err(ChunkError::Stopped);
                    }
                    let to = window_end(text, from, end);
                    let base_char = char_at(from);
                    for piece in splitter.pieces(&text[from..to]) {
                        out.push(Core {
                            byte: from + piece.byte_offset,
                            char: base_char + piece.char_offset,
                            end: from + piece.byte_offset + piece.chunk.len(),
                        });
                    }
                    from = to;
                }
            }
            Stretch::Run { start, end } => {
                let base_char = char_at(start);
                cut_run(text, start, end, base_char, core_tokens, stop, &mut out)?;
            }
        }
    }
    Ok(out)
}

/// Cut the run `text[start..end]` (starting at character `base_char`) into pieces of at most
/// `budget` tokens: parts of at most `4 × budget` characters, each counted once and cut into
/// as many equal parts as its count needs; a part still over (its characters cost unevenly)
/// is halved until it fits.
fn cut_run(
    text: &str,
    start: usize,
    end: usize,
    base_char: usize,
    budget: usize,
    stop: &dyn Fn() -> bool,
    out: &mut Vec<Core>,
) -> Result<(), ChunkError> {
    let part_chars = budget.saturating_mul(4).max(1);
    let mut char = base_char;
    let mut from = start;
    while from < end {
        if stop() {
            return Err(ChunkError::Stopped);
        }
        let to = advance_chars(text, from, end, part_chars);
        let chars = text[from..to].chars().count();
        let tokens = Tokens.size(&text[from..to]);
        let parts = tokens.div_ceil(budget.max(1)).max(1);
        let mut part_from = from;
        let mut part_char = char;
        for k in 0..parts {
            // Equal shares of the characters; the last takes what is left.
            let take = if k + 1 == parts {
                usize::MAX
            } else {
                chars / parts
            };
            let part_to = advance_chars(text, part_from, to, take);
            fit_part(text, part_from, part_to, part_char, budget, out);
            part_char += text[part_from..part_to].chars().count();
            part_from = part_to;
        }
        char += chars;
        from = to;
    }
    Ok(())
}

/// `text[start..end]` as one piece when it fits `budget` tokens (or is one character), else
/// its halves, each the same way.
fn fit_part(text: &str, start: usize, end: usize, char: usize, budget: usize, out: &mut Vec<Core>) {
    if start >= end {
        return;
    }
    let chars = text[start..end].chars().count();
    if chars <= 1 || Tokens.size(&text[start..end]) <= budget {
        out.push(Core {
            byte: start,
            char,
            end,
        });
        return;
    }
    let middle = advance_chars(text, start, end, chars / 2);
    fit_part(text, start, middle, char, budget, out);
    fit_part(text, middle, end, char + chars / 2, budget, out);
}

/// The byte `n` characters after `from`, at most `end`.
fn advance_chars(text: &str, from: usize, end: usize, n: usize) -> usize {
    text[from..end]
        .char_indices()
        .nth(n)
        .map_or(end, |(i, _)| from + i)
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
