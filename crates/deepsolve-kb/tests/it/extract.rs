//! Extraction of each format, and each hostile input ending in its named error.

use std::path::PathBuf;
use std::time::Duration;

use deepsolve_kb::extract::{
    ChildCommand, ExtractError, Input, Kind, Limits, extract, find_on_path,
};

use crate::fixtures::{self, Para, PdfPage};

/// The real child binary, and no fallback unless a test asks for it (so each test sees whose
/// result it gets).
fn limits() -> Limits {
    Limits {
        pdf_child: Some(ChildCommand {
            program: PathBuf::from(env!("CARGO_BIN_EXE_deepsolve-kb-pdf")),
            args: Vec::new(),
        }),
        pdftotext: None,
        pdf_timeout: Duration::from_secs(60),
        ..Limits::default()
    }
}

fn with_pdftotext() -> Limits {
    Limits {
        pdftotext: Some(
            find_on_path("pdftotext").expect("pdftotext (poppler-utils, scripts/install-deps)"),
        ),
        ..limits()
    }
}

fn bytes<'a>(name: &'a str, bytes: &'a [u8]) -> Input<'a> {
    Input::Bytes { name, bytes }
}

const ENGLISH_1: &[&str] = &[
    "Lecture 3: Integration by parts.",
    "The product rule gives the formula for integrating a product.",
];
const ENGLISH_2: &[&str] = &["Example: the integral of x times exp(x) is (x - 1) exp(x) + C."];
const CHINESE: &[&str] = &["分部积分法是微积分的基本方法。", "我们先看一个例子！"];

fn lecture_pdf() -> Vec<u8> {
    fixtures::pdf(&[
        PdfPage::English(ENGLISH_1),
        PdfPage::English(ENGLISH_2),
        PdfPage::Chinese(CHINESE),
    ])
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect()
}

fn assert_lecture_pages(doc: &deepsolve_kb::extract::Extracted, title: &str) {
    assert_eq!(doc.kind, Kind::Pdf);
    assert_eq!(doc.title, title);
    let numbers: Vec<u32> = doc.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert!(
        doc.pages[0].text.contains("Integration by parts"),
        "{:?}",
        doc.pages[0].text
    );
    assert!(
        doc.pages[1].text.contains("exp(x)"),
        "{:?}",
        doc.pages[1].text
    );
    assert!(!doc.pages[0].text.contains("exp(x) +"));
    let chinese = squash(&doc.pages[2].text);
    assert!(
        chinese.contains("分部积分法是微积分的基本方法。"),
        "{chinese:?}"
    );
    assert!(chinese.contains("我们先看一个例子！"), "{chinese:?}");
}

#[test]
fn pdf_pages_in_english_and_chinese_come_from_the_child() {
    let pdf = lecture_pdf();
    let doc = extract(bytes("lecture3.pdf", &pdf), &limits()).unwrap();
    // The child reads the title from the document's info dictionary.
    assert_lecture_pages(&doc, "Lecture 3: Integration by Parts");
}

#[test]
fn pdf_pages_in_english_and_chinese_come_from_pdftotext_too() {
    let pdf = lecture_pdf();
    let limits = Limits {
        pdf_child: None,
        ..with_pdftotext()
    };
    let doc = extract(bytes("lecture3.pdf", &pdf), &limits).unwrap();
    assert_lecture_pages(&doc, "lecture3");
}

#[test]
fn a_pdf_is_read_from_a_path_and_known_by_its_signature() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lecture3.txt");
    std::fs::write(&path, lecture_pdf()).unwrap();
    let doc = extract(Input::Path(&path), &limits()).unwrap();
    assert_eq!(doc.kind, Kind::Pdf);
    assert_eq!(doc.pages.len(), 3);
}

fn broken_pdf() -> Vec<u8> {
    fixtures::pdf(&[
        PdfPage::English(ENGLISH_1),
        PdfPage::BrokenFont(&["Page two survives in poppler."]),
    ])
}

#[test]
fn a_pdf_that_crashes_the_parser_is_a_named_error_and_the_parent_lives() {
    let pdf = broken_pdf();
    let err = extract(bytes("broken.pdf", &pdf), &limits()).unwrap_err();
    let ExtractError::PdfCrashed {
        name,
        signal,
        stderr,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(name, "broken.pdf");
    assert_eq!(*signal, libc::SIGABRT);
    assert!(stderr.contains("panicked"), "{stderr}");
    assert!(
        err.to_string()
            .starts_with("broken.pdf: the PDF parser crashed"),
        "{err}"
    );
}

#[test]
fn pdftotext_reads_what_the_parser_crashes_on() {
    let pdf = broken_pdf();
    let doc = extract(bytes("broken.pdf", &pdf), &with_pdftotext()).unwrap();
    assert_eq!(doc.pages.len(), 2);
    assert!(doc.pages[0].text.contains("Integration by parts"));
    assert!(doc.pages[1].text.contains("Page two survives in poppler."));
}

#[test]
fn a_malformed_pdf_is_a_named_parser_failure() {
    let junk = b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R\nthis is not a PDF at all\n";
    for limits in [limits(), with_pdftotext()] {
        let err = extract(bytes("junk.pdf", junk), &limits).unwrap_err();
        let ExtractError::PdfFailed { name, code, stderr } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(name, "junk.pdf");
        assert_eq!(*code, 1);
        assert!(stderr.contains("not a readable PDF"), "{stderr}");
    }
}

#[test]
fn a_pdf_of_ten_thousand_pages_is_refused_by_the_page_limit() {
    let pdf = fixtures::many_pages_pdf(10_000);
    for limits in [limits(), with_pdftotext()] {
        let err = extract(bytes("huge.pdf", &pdf), &limits).unwrap_err();
        let ExtractError::TooManyPages { name, pages, limit } = &err else {
            panic!("{err:?}");
        };
        assert_eq!((name.as_str(), *pages, *limit), ("huge.pdf", 10_000, 2_000));
    }
}

#[test]
fn pdftotext_alone_stops_one_page_past_the_limit() {
    let pdf = fixtures::many_pages_pdf(30);
    let limits = Limits {
        pdf_child: None,
        max_pages: 10,
        ..with_pdftotext()
    };
    let err = extract(bytes("thirty.pdf", &pdf), &limits).unwrap_err();
    assert!(
        matches!(
            err,
            ExtractError::TooManyPages {
                pages: 11,
                limit: 10,
                ..
            }
        ),
        "{err:?}"
    );
}

/// A child that never finishes: `sh -c 'sleep 30'` (the PDF arguments land in `$0…`).
fn shell_child(script: &str) -> Option<ChildCommand> {
    Some(ChildCommand {
        program: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), script.into(), "sh".into()],
    })
}

#[test]
fn a_child_past_its_time_is_killed_and_named() {
    let limits = Limits {
        pdf_child: shell_child("sleep 30"),
        pdf_timeout: Duration::from_millis(300),
        ..limits()
    };
    let pdf = lecture_pdf();
    let err = extract(bytes("slow.pdf", &pdf), &limits).unwrap_err();
    assert!(
        matches!(&err, ExtractError::PdfTimeout { name, .. } if name == "slow.pdf"),
        "{err:?}"
    );
}

/// Whether a process is gone (or a zombie awaiting its reaper), waiting a little for the kill
/// to land.
fn gone(pid: &str) -> bool {
    (0..500).any(|_| {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        let dead = state.map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if !dead {
            std::thread::sleep(Duration::from_millis(10));
        }
        dead
    })
}

#[test]
fn a_child_leaving_a_process_behind_takes_it_down_and_keeps_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "sleep 300 >/dev/null 2>&1 </dev/null & echo $! > '{}'; echo 'bad font' >&2; exit 2",
        pid_file.display()
    );
    let limits = Limits {
        pdf_child: shell_child(&script),
        ..limits()
    };
    let err = extract(bytes("left.pdf", &lecture_pdf()), &limits).unwrap_err();
    let ExtractError::PdfFailed { code, stderr, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!((*code, stderr.as_str()), (2, "bad font"));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(gone(pid.trim()), "the straggler {pid} outlived the child");
}

#[test]
fn the_memory_limit_applies_to_the_child() {
    let limits = Limits {
        pdf_child: shell_child("exec python3 -c 'bytearray(1 << 30)'"),
        pdf_memory_bytes: 256 << 20,
        ..limits()
    };
    let pdf = lecture_pdf();
    let err = extract(bytes("greedy.pdf", &pdf), &limits).unwrap_err();
    let ExtractError::PdfFailed { stderr, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(stderr.contains("MemoryError"), "{stderr}");
}

#[test]
fn without_a_parser_or_pdftotext_a_pdf_is_refused_by_name() {
    let limits = Limits {
        pdf_child: None,
        ..limits()
    };
    let err = extract(bytes("a.pdf", &lecture_pdf()), &limits).unwrap_err();
    assert!(
        matches!(err, ExtractError::PdfChildMissing { .. }),
        "{err:?}"
    );
}

fn notes_docx() -> Vec<u8> {
    fixtures::docx(
        &[
            Para(Some("Title"), Some("Calculus Notes")),
            Para(Some("berschrift1"), Some("Integration")),
            Para(None, Some("Integration undoes differentiation & more.")),
            Para(Some("berschrift2"), Some("By parts")),
            Para(
                Some("Normal"),
                Some("Choose u to simplify when differentiated."),
            ),
            Para(None, None),
            Para(Some("berschrift1"), Some("Series")),
            Para(None, Some("A geometric series converges when |r| < 1.")),
        ],
        None,
    )
}

#[test]
fn docx_headings_become_markdown_and_page_breaks_pages() {
    let doc = extract(bytes("notes.docx", &notes_docx()), &limits()).unwrap();
    assert_eq!(doc.kind, Kind::Docx);
    assert_eq!(doc.title, "Calculus Notes");
    assert_eq!(doc.pages.len(), 2);
    assert_eq!(
        doc.pages[0].text,
        "# Calculus Notes\n\n# Integration\n\nIntegration undoes differentiation & more.\n\n\
         ## By parts\n\nChoose u to simplify when differentiated.\n\n"
    );
    assert_eq!(doc.pages[1].number, 2);
    assert_eq!(
        doc.pages[1].text,
        "# Series\n\nA geometric series converges when |r| < 1.\n\n"
    );
}

#[test]
fn docx_title_comes_from_core_properties_first() {
    let docx = fixtures::docx(&[Para(None, Some("Body text."))], Some("Lecture 7 & 8"));
    let doc = extract(bytes("l7.docx", &docx), &limits()).unwrap();
    assert_eq!(doc.title, "Lecture 7 & 8");
}

fn bomb_limits() -> Limits {
    Limits {
        max_inflated_bytes: 1 << 20,
        ..limits()
    }
}

#[test]
fn a_zip_bomb_docx_is_refused_by_its_declared_size() {
    let bomb = fixtures::bomb_docx(8 << 20);
    assert!(
        bomb.len() < 200_000,
        "the fixture should be a bomb: {} bytes",
        bomb.len()
    );
    let err = extract(bytes("bomb.docx", &bomb), &bomb_limits()).unwrap_err();
    let ExtractError::ZipBomb { name, reason } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(name, "bomb.docx");
    assert!(reason.contains("declares 8388608 bytes"), "{reason}");
}

#[test]
fn a_zip_bomb_docx_lying_about_its_size_is_refused_by_what_it_inflates() {
    let bomb = fixtures::lie_about_sizes(fixtures::bomb_docx(8 << 20), 1_000);
    let err = extract(bytes("liar.docx", &bomb), &bomb_limits()).unwrap_err();
    let ExtractError::ZipBomb { reason, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(
        reason.contains("inflates past its declared 1000 bytes"),
        "{reason}"
    );
}

#[test]
fn a_zip_of_too_many_entries_is_refused() {
    let names: Vec<String> = (0..50).map(|i| format!("word/media/{i}.xml")).collect();
    let zip = fixtures::zip_of(names.iter().map(|n| (n.as_str(), &b"<x/>"[..])));
    let limits = Limits {
        max_zip_entries: 20,
        ..limits()
    };
    let err = extract(bytes("many.docx", &zip), &limits).unwrap_err();
    assert!(
        matches!(&err, ExtractError::ZipBomb { reason, .. } if reason.contains("50 entries")),
        "{err:?}"
    );
}

#[test]
fn a_zip_that_is_not_a_docx_is_refused_by_name() {
    let zip = fixtures::zip_of([("content.xml", &b"<x/>"[..])]);
    let err = extract(bytes("sheet.docx", &zip), &limits()).unwrap_err();
    assert!(
        matches!(&err, ExtractError::Docx { reason, .. } if reason.contains("word/document.xml")),
        "{err:?}"
    );
    let err = extract(bytes("sheet.xlsx", &zip), &limits()).unwrap_err();
    assert!(
        matches!(&err, ExtractError::Unsupported { name } if name == "sheet.xlsx"),
        "{err:?}"
    );
}

#[test]
fn html_keeps_the_article_as_markdown_and_drops_the_boilerplate() {
    let html = fixtures::html_article();
    let doc = extract(bytes("ibp.html", html.as_bytes()), &limits()).unwrap();
    assert_eq!(doc.kind, Kind::Html);
    assert!(doc.title.contains("Integration by Parts"), "{}", doc.title);
    let text = &doc.pages[0].text;
    assert!(text.contains("## The formula"), "{text}");
    assert!(text.contains("## Worked example"), "{text}");
    assert!(text.contains("tabular method"), "{text}");
    for boilerplate in ["Shop our merchandise", "cheap calculators", "Cookie policy"] {
        assert!(!text.contains(boilerplate), "{boilerplate} in {text}");
    }
}

#[test]
fn an_html_fragment_without_an_article_falls_back_to_all_its_text() {
    let html = "<html><body><ul><li>alpha</li><li>beta</li></ul></body></html>";
    let doc = extract(bytes("links.htm", html.as_bytes()), &limits()).unwrap();
    assert!(doc.pages[0].text.contains("alpha") && doc.pages[0].text.contains("beta"));
}

#[test]
fn markdown_and_text_are_utf8_with_a_title() {
    let md = "\u{feff}Intro line\r\n\r\n# 第一章 极限\r\n\r\nText.\r\n";
    let doc = extract(bytes("ch1.md", md.as_bytes()), &limits()).unwrap();
    assert_eq!(
        (doc.kind, doc.title.as_str()),
        (Kind::Markdown, "第一章 极限")
    );
    assert_eq!(doc.pages[0].text, "Intro line\n\n# 第一章 极限\n\nText.\n");
    let doc = extract(bytes("notes.txt", b"# not a heading in text\n"), &limits()).unwrap();
    assert_eq!((doc.kind, doc.title.as_str()), (Kind::Text, "notes"));
}

#[test]
fn binary_junk_named_txt_is_not_text() {
    let err = extract(bytes("a.txt", b"abc\xff\xfe\x00junk"), &limits()).unwrap_err();
    assert!(
        matches!(err, ExtractError::NotText { offset: 3, .. }),
        "{err:?}"
    );
    let err = extract(bytes("b.md", b"abc\x00def"), &limits()).unwrap_err();
    assert!(
        matches!(err, ExtractError::NotText { offset: 3, .. }),
        "{err:?}"
    );
    let err = extract(bytes("c.txt", b"  \n\n "), &limits()).unwrap_err();
    assert!(matches!(err, ExtractError::Empty { .. }), "{err:?}");
}

#[test]
fn other_formats_are_refused_by_name() {
    for name in ["photo.jpg", "slides.pptx", "README"] {
        let err = extract(bytes(name, b"whatever"), &limits()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{name}: unsupported format (PDF, DOCX, HTML, Markdown and plain text are accepted)"
            )
        );
    }
}

#[test]
fn a_file_over_the_size_limit_is_refused_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.txt");
    std::fs::write(&path, vec![b'a'; 5_000]).unwrap();
    let limits = Limits {
        max_file_bytes: 1_000,
        ..limits()
    };
    let err = extract(Input::Path(&path), &limits).unwrap_err();
    assert!(
        matches!(
            err,
            ExtractError::TooLarge {
                size: 5_000,
                limit: 1_000,
                ..
            }
        ),
        "{err:?}"
    );
    let err = extract(bytes("big.txt", &[b'a'; 5_000]), &limits).unwrap_err();
    assert!(matches!(err, ExtractError::TooLarge { .. }), "{err:?}");
}

#[test]
fn a_child_writing_much_to_stderr_is_not_blocked_and_its_last_words_are_kept() {
    let limits = Limits {
        pdf_child: shell_child(
            "yes 'warning: odd font' | head -c 2000000 >&2; echo 'the real reason' >&2; exit 1",
        ),
        ..limits()
    };
    let err = extract(bytes("noisy.pdf", &lecture_pdf()), &limits).unwrap_err();
    let ExtractError::PdfFailed { stderr, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(
        stderr.ends_with("the real reason") && stderr.len() <= 2_000,
        "{}",
        stderr.len()
    );
}
