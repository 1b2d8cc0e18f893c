//! Text PDFs of the bench's notes, written by the testkit's PDF writer: the ingest benchmark
//! reads a real PDF through the real parser without any file from outside the project.

use deepsolve_testkit::documents::{PdfPage, pdf};

/// Lines longer than this are wrapped at a space, as a word processor would.
const LINE_CHARS: usize = 90;
/// Lines that fit on a Letter page at 12 pt with 16 pt leading.
const LINES_PER_PAGE: usize = 42;

/// A PDF with one page per entry of `pages`, each page's text wrapped into lines (ASCII:
/// the writer's Helvetica has no other glyphs, so anything else becomes `?`).
pub(crate) fn text_pdf(pages: &[String]) -> Vec<u8> {
    let lines: Vec<Vec<String>> = pages.iter().map(|p| wrap(p)).collect();
    let refs: Vec<Vec<&str>> = lines
        .iter()
        .map(|page| page.iter().map(String::as_str).collect())
        .collect();
    let pages: Vec<PdfPage<'_>> = refs.iter().map(|l| PdfPage::English(l)).collect();
    pdf(&pages)
}

/// Paragraphs (blank-line separated) wrapped at spaces, a blank line between paragraphs, at
/// most a page of lines.
fn wrap(text: &str) -> Vec<String> {
    let ascii: String = text
        .chars()
        .map(|c| if c.is_ascii() { c } else { '?' })
        .collect();
    let mut lines = Vec::new();
    for paragraph in ascii.split("\n\n") {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && line.len() + 1 + word.len() > LINE_CHARS {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            lines.push(line);
        }
        lines.push(String::new());
    }
    lines.truncate(LINES_PER_PAGE);
    lines
}
