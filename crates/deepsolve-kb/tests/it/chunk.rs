//! Chunking: sizes within the budget, overlap, order, pages, heading paths, CJK sentences.

use deepsolve_kb::chunk::{Chunk, ChunkError, ChunkOptions, RUN_CHARS, chunk, chunk_until};
use deepsolve_kb::extract::{Extracted, Kind, Markup, Page};
use proptest::prelude::*;

fn doc(markup: Markup, pages: &[&str]) -> Extracted {
    Extracted {
        kind: Kind::Markdown,
        title: "t".into(),
        markup,
        pages: pages
            .iter()
            .zip(1..)
            .map(|(text, number)| Page {
                number,
                text: (*text).to_owned(),
            })
            .collect(),
    }
}

fn tokens(text: &str) -> usize {
    deepsolve_core::count_tokens(text) as usize
}

/// `n` distinct English sentences, in paragraphs of five.
fn english(n: usize, seed: &str) -> String {
    (0..n)
        .map(|i| {
            let sep = if i % 5 == 4 { "\n\n" } else { " " };
            format!("Sentence {i} of {seed} explains one step of the integral carefully.{sep}")
        })
        .collect()
}

/// Each chunk is its page's text at its character offsets.
fn assert_offsets(doc: &Extracted, chunks: &[Chunk]) {
    for c in chunks {
        let page = &doc.pages[(c.page - 1) as usize].text;
        let slice: String = page
            .chars()
            .skip(c.char_start)
            .take(c.char_end - c.char_start)
            .collect();
        assert_eq!(slice, c.text, "chunk {}", c.ordinal);
    }
}

#[test]
fn english_pages_split_within_the_budget_with_overlap_in_order() {
    let doc = doc(
        Markup::Plain,
        &[&english(200, "page one"), &english(30, "page two")],
    );
    let chunks = chunk(&doc, &ChunkOptions::default()).unwrap();
    assert!(chunks.len() >= 5, "{}", chunks.len());
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.ordinal as usize, i);
        assert!(
            c.tokens as usize <= 512 && c.tokens as usize == tokens(&c.text),
            "{}",
            c.tokens
        );
        // Sentence boundaries: a chunk ends where a sentence does.
        assert!(c.text.ends_with('.'), "{:?}", &c.text[c.text.len() - 20..]);
    }
    assert_offsets(&doc, &chunks);
    let on_page = |p| {
        chunks
            .iter()
            .filter(move |c| c.page == p)
            .collect::<Vec<_>>()
    };
    let (one, two) = (on_page(1), on_page(2));
    assert!(one.len() >= 4 && !two.is_empty());
    assert!(one.iter().all(|c| c.text.contains("page one")));
    assert!(two.iter().all(|c| c.text.contains("page two")));
    for pair in one.windows(2) {
        // Overlap: the next chunk starts before this one ends, and repeats its end.
        assert!(
            pair[1].char_start < pair[0].char_end,
            "{} {}",
            pair[0].char_end,
            pair[1].char_start
        );
        assert!(pair[1].char_start > pair[0].char_start);
        let shared = pair[0].char_end - pair[1].char_start;
        let repeated: String = pair[1].text.chars().take(shared).collect();
        assert!(pair[0].text.ends_with(&repeated));
        assert!(
            !repeated.is_empty() && tokens(&repeated) <= 64,
            "{}",
            tokens(&repeated)
        );
    }
    // Reading order: pages ascending, offsets ascending within a page.
    assert!(
        chunks
            .windows(2)
            .all(|w| w[0].page < w[1].page || w[0].char_start < w[1].char_start)
    );
}

#[test]
fn chinese_without_spaces_splits_at_sentence_ends_within_the_budget() {
    let sentences = [
        "函数的极限描述了自变量趋近某点时函数值的变化趋势。",
        "这是微积分的基础！",
        "为什么要学习它？",
    ];
    let text: String = (0..300).map(|i| sentences[i % 3]).collect();
    assert!(!text.contains(' '));
    let doc = doc(Markup::Plain, &[&text]);
    let options = ChunkOptions {
        max_tokens: 128,
        overlap_tokens: 16,
    };
    let chunks = chunk(&doc, &options).unwrap();
    assert!(chunks.len() > 10, "{}", chunks.len());
    for c in &chunks {
        assert!(c.tokens <= 128, "{}", c.tokens);
        assert!(c.text.ends_with(['。', '！', '？']), "{:?}", c.text);
    }
    assert_offsets(&doc, &chunks);
}

#[test]
fn markdown_headings_give_each_chunk_its_path_across_pages() {
    let page1 = format!(
        "# Calculus\n\n{}\n\n## Limits\n\n{}\n\n### Squeeze theorem\n\n{}",
        english(5, "intro"),
        english(60, "limits"),
        english(60, "squeeze")
    );
    let page2 = format!(
        "{}\n\n# Algebra\n\n{}",
        english(5, "carried over"),
        english(60, "algebra")
    );
    let doc = doc(Markup::Markdown, &[&page1, &page2]);
    let chunks = chunk(&doc, &ChunkOptions::default()).unwrap();
    assert_eq!(chunks[0].heading_path, ["Calculus"]);
    let limits = chunks
        .iter()
        .filter(|c| c.text.contains("of limits") && !c.text.contains("queeze"))
        .collect::<Vec<_>>();
    assert!(limits.len() >= 2);
    assert!(
        limits[1..]
            .iter()
            .all(|c| c.heading_path == ["Calculus", "Limits"])
    );
    // A chunk that starts inside a section has that section's path.
    let squeeze = chunks.iter().rfind(|c| c.page == 1).unwrap();
    assert!(squeeze.text.starts_with("Sentence"), "{}", squeeze.text);
    assert_eq!(
        squeeze.heading_path,
        ["Calculus", "Limits", "Squeeze theorem"]
    );
    let carried = chunks.iter().find(|c| c.page == 2).unwrap();
    assert_eq!(
        carried.heading_path,
        ["Calculus", "Limits", "Squeeze theorem"]
    );
    let algebra = chunks.last().unwrap();
    assert_eq!(algebra.page, 2);
    assert_eq!(algebra.heading_path, ["Algebra"]);
    assert_offsets(&doc, &chunks);
}

#[test]
fn a_hash_in_plain_text_or_code_is_no_heading() {
    let md = "# Real\n\n```\n# a comment\n```\n\ntext";
    let chunks = chunk(&doc(Markup::Markdown, &[md]), &ChunkOptions::default()).unwrap();
    assert!(
        chunks.iter().all(|c| c.heading_path == ["Real"]),
        "{chunks:?}"
    );
    let chunks = chunk(
        &doc(Markup::Plain, &["# no\n\ntext"]),
        &ChunkOptions::default(),
    )
    .unwrap();
    assert!(chunks.iter().all(|c| c.heading_path.is_empty()));
}

#[test]
fn an_overlap_not_below_the_size_is_refused() {
    let options = ChunkOptions {
        max_tokens: 64,
        overlap_tokens: 64,
    };
    assert!(chunk(&doc(Markup::Plain, &["x"]), &options).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn chunks_stay_within_budget_cover_the_text_and_are_deterministic(
        words in prop::collection::vec(
            "[a-z]{1,12}|[\u{4e00}-\u{4e50}]{1,6}[。！？]?|[.!?]|\n\n|\n\n#{1,3} [a-z]{1,8}\n\n",
            0..600,
        ),
        max in 16usize..200,
        markdown in any::<bool>(),
    ) {
        let text = words.join(" ");
        let markup = if markdown { Markup::Markdown } else { Markup::Plain };
        let doc = doc(markup, &[&text]);
        let options = ChunkOptions { max_tokens: max, overlap_tokens: max / 8 };
        let chunks = chunk(&doc, &options).unwrap();
        prop_assert_eq!(&chunks, &chunk(&doc, &options).unwrap());
        let mut covered = vec![false; text.chars().count()];
        for (i, c) in chunks.iter().enumerate() {
            prop_assert_eq!(c.ordinal as usize, i);
            prop_assert!(c.tokens as usize <= max, "{} > {}", c.tokens, max);
            covered[c.char_start..c.char_end].iter_mut().for_each(|b| *b = true);
        }
        for (ch, seen) in text.chars().zip(&covered) {
            prop_assert!(*seen || ch.is_whitespace(), "{:?} not in any chunk", ch);
        }
        assert_offsets(&doc, &chunks);
    }
}

/// A piece of a generated text: `len` characters of one kind.
fn piece(kind: u8, len: usize) -> String {
    const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    match kind % 6 {
        0 => "x".repeat(len),
        1 => (0..len)
            .map(|i| BASE64[(i * 7 + i / 5) % 64] as char)
            .collect(),
        2 => (0..len)
            .map(|i| char::from(b'0' + (i % 10) as u8))
            .collect(),
        3 => "汉".repeat(len),
        4 => "🙂".repeat(len),
        _ => english(len / 60 + 1, "prose"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Runs of every length, up to several times the longest given to text-splitter: every
    /// chunk within the size (its count exact), the text covered, the offsets right, and no
    /// more chunks than a bound linear in the text's tokens.
    #[test]
    fn runs_without_breaks_of_any_length_are_cut_within_the_size(
        pieces in prop::collection::vec((any::<u8>(), 0usize..4 * RUN_CHARS), 1..6),
        max in 16usize..600,
        markdown in any::<bool>(),
    ) {
        let text: String = pieces
            .iter()
            .map(|(kind, len)| piece(*kind, *len))
            .collect::<Vec<_>>()
            .join("\n\n");
        let markup = if markdown { Markup::Markdown } else { Markup::Plain };
        let doc = doc(markup, &[&text]);
        let options = ChunkOptions { max_tokens: max, overlap_tokens: max / 8 };
        let chunks = chunk(&doc, &options).unwrap();
        let mut covered = vec![false; text.chars().count()];
        for c in &chunks {
            prop_assert!(c.tokens as usize <= max, "{} > {}", c.tokens, max);
            prop_assert_eq!(c.tokens as usize, tokens(&c.text));
            covered[c.char_start..c.char_end].iter_mut().for_each(|b| *b = true);
        }
        for (ch, seen) in text.chars().zip(&covered) {
            prop_assert!(*seen || ch.is_whitespace(), "{:?} not in any chunk", ch);
        }
        assert_offsets(&doc, &chunks);
        let core = max - max / 8;
        let bound = 3 * tokens(&text).div_ceil(core) + 2 * pieces.len() + 1;
        prop_assert!(chunks.len() <= bound, "{} chunks, bound {}", chunks.len(), bound);
    }
}

/// The least time of three to chunk `text` as Markdown.
fn chunk_time(text: &str) -> std::time::Duration {
    let doc = doc(Markup::Markdown, &[text]);
    (0..3)
        .map(|_| {
            let started = std::time::Instant::now();
            chunk(&doc, &ChunkOptions::default()).unwrap();
            started.elapsed()
        })
        .min()
        .unwrap()
}

#[test]
fn chunking_time_grows_linearly_with_an_unbroken_run() {
    // Quadratic work makes 8 times the text cost 64 times the time; linear, 8. The bound
    // between them leaves room for a loaded machine.
    let small = chunk_time(&"x".repeat(128 * 1024));
    let large = chunk_time(&"x".repeat(1024 * 1024));
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
    assert!(
        ratio < 24.0,
        "{small:?} for 128 KiB, {large:?} for 1 MiB: ×{ratio:.1}"
    );
}

#[test]
fn chunking_stops_when_asked() {
    let doc = doc(Markup::Plain, &[&"y".repeat(1024 * 1024)]);
    let asked = std::sync::atomic::AtomicUsize::new(0);
    let stop = || asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 3;
    let result = chunk_until(&doc, &ChunkOptions::default(), &stop);
    assert!(matches!(result, Err(ChunkError::Stopped)), "{result:?}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 4);
}

/// Extraction and chunking together, on the generated documents.
mod pipeline {
    use std::path::PathBuf;

    use deepsolve_kb::chunk::{ChunkOptions, chunk};
    use deepsolve_kb::extract::{ChildCommand, Input, Limits, extract};

    use crate::fixtures::{self, Para, PdfPage};

    fn limits() -> Limits {
        Limits {
            pdf_child: Some(ChildCommand {
                program: PathBuf::from(env!("CARGO_BIN_EXE_deepsolve-kb-pdf")),
                args: Vec::new(),
            }),
            pdftotext: None,
            ..Limits::default()
        }
    }

    #[test]
    fn pdf_chunks_cite_their_pages() {
        let pdf = fixtures::pdf(&[
            PdfPage::English(&["Limits describe behaviour near a point."]),
            PdfPage::English(&["Derivatives are limits of difference quotients."]),
            PdfPage::Chinese(&["导数是差商的极限。"]),
        ]);
        let doc = extract(
            Input::Bytes {
                name: "l.pdf",
                bytes: &pdf,
            },
            &limits(),
        )
        .unwrap();
        let chunks = chunk(&doc, &ChunkOptions::default()).unwrap();
        let pages: Vec<(u32, bool)> = chunks
            .iter()
            .map(|c| (c.page, c.heading_path.is_empty()))
            .collect();
        assert_eq!(pages, [(1, true), (2, true), (3, true)]);
        assert!(chunks[1].text.contains("difference quotients"));
        assert!(chunks[2].text.contains("导数是差商的极限。"));
    }

    #[test]
    fn docx_chunks_carry_heading_paths_and_pages() {
        let long: String = (0..80)
            .map(|i| format!("Step {i} of the proof uses the previous step and the definition. "))
            .collect();
        let docx = fixtures::docx(
            &[
                Para(Some("berschrift1"), Some("Limits")),
                Para(Some("berschrift2"), Some("Squeeze theorem")),
                Para(None, Some(&long)),
                Para(None, None),
                Para(Some("berschrift1"), Some("Derivatives")),
                Para(None, Some("The derivative is a limit.")),
            ],
            None,
        );
        let doc = extract(
            Input::Bytes {
                name: "n.docx",
                bytes: &docx,
            },
            &limits(),
        )
        .unwrap();
        let chunks = chunk(&doc, &ChunkOptions::default()).unwrap();
        assert!(chunks.len() >= 3, "{chunks:?}");
        // A heading the splitter cut off travels with its section's text, never alone.
        assert!(
            chunks[0]
                .text
                .starts_with("# Limits\n\n## Squeeze theorem\n\nStep 0")
        );
        for c in &chunks {
            assert!(
                c.text
                    .lines()
                    .any(|l| !l.trim().is_empty() && !l.starts_with('#')),
                "{c:?}"
            );
        }
        let (last, body) = chunks.split_last().unwrap();
        assert_eq!(
            (last.page, last.heading_path.clone()),
            (2, vec!["Derivatives".to_owned()])
        );
        assert!(body.iter().all(|c| c.page == 1));
        assert!(
            body.iter()
                .all(|c| c.heading_path == ["Limits", "Squeeze theorem"])
        );
    }
}
