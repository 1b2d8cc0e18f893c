//! A minimal text PDF (Helvetica, one content stream per page), so the ingest benchmark reads
//! a real PDF through the real parser without any file from outside the project.

use std::fmt::Write as _;

/// Lines longer than this are wrapped at a space, as a word processor would.
const LINE_CHARS: usize = 90;
/// Lines that fit on a Letter page at 12 pt with 14 pt leading.
const LINES_PER_PAGE: usize = 48;

/// A PDF with one page per entry of `pages`, each page's text wrapped into lines.
pub(crate) fn text_pdf(title: &str, pages: &[String]) -> Vec<u8> {
    let first_page = 4;
    let kids: Vec<String> = (0..pages.len())
        .map(|i| format!("{} 0 R", first_page + 2 * i))
        .collect();
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            kids.join(" "),
            pages.len()
        )
        .into_bytes(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    ];
    for (i, text) in pages.iter().enumerate() {
        let contents = first_page + 2 * i + 1;
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
                 /Resources << /Font << /F1 3 0 R >> >> /Contents {contents} 0 R >>"
            )
            .into_bytes(),
        );
        objects.push(stream(&page_content(text)));
    }
    objects.push(format!("<< /Title ({}) >>", escape(title)).into_bytes());
    let info = objects.len();
    write_pdf(&objects, info)
}

fn page_content(text: &str) -> Vec<u8> {
    let mut out = String::from("BT /F1 12 Tf 14 TL 56 740 Td\n");
    for line in wrap(text).iter().take(LINES_PER_PAGE) {
        let _ = writeln!(out, "({}) Tj T*", escape(line));
    }
    out.push_str("ET\n");
    out.into_bytes()
}

/// Paragraphs (blank-line separated) wrapped at spaces; a blank line between paragraphs.
fn wrap(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.split("\n\n") {
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
    lines
}

/// Helvetica's WinAnsi covers ASCII: anything else becomes `?` rather than wrong bytes.
fn escape(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii() { c } else { '?' })
        .collect::<String>()
        .replace('\\', "\\\\")
        .replace('(', "\\(")
        .replace(')', "\\)")
}

fn stream(data: &[u8]) -> Vec<u8> {
    let mut obj = format!("<< /Length {} >>\nstream\n", data.len()).into_bytes();
    obj.extend_from_slice(data);
    obj.extend_from_slice(b"\nendstream");
    obj
}

/// Header, numbered objects, cross-reference table, trailer (the Info dictionary is object
/// `info`, 1-based).
fn write_pdf(objects: &[Vec<u8>], info: usize) -> Vec<u8> {
    let mut out = b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, obj) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(obj);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    let mut tail = format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for offset in offsets {
        let _ = writeln!(tail, "{offset:010} 00000 n ");
    }
    let _ = write!(
        tail,
        "trailer\n<< /Size {} /Root 1 0 R /Info {info} 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    );
    out.extend_from_slice(tail.as_bytes());
    out
}
