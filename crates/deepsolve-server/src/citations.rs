//! How a cited source reads for people, wherever the server writes one as text (the OpenAI
//! facade's `Sources` list): `[1] lecture.pdf, p. 12 · 3.2 Limits`.

use deepsolve_protocol::Source;

/// One line of a `Sources` list.
pub fn source_line(source: &Source) -> String {
    let mut line = format!("[{}] {}", source.n, source.title);
    if let Some(page) = source.page {
        line.push_str(&format!(", p. {page}"));
    }
    if let Some(section) = source.section.as_deref().filter(|s| !s.is_empty()) {
        line.push_str(&format!(" · {section}"));
    }
    if source.document_id.is_none()
        && let Some(url) = &source.url
    {
        line.push_str(&format!(" <{url}>"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(n: u32, title: &str) -> Source {
        Source {
            n,
            title: title.into(),
            url: None,
            kb: None,
            document_id: None,
            page: None,
            chunk_id: None,
            score: None,
            section: None,
            excerpt: None,
        }
    }

    #[test]
    fn a_line_names_the_file_page_and_section() {
        let mut doc = source(1, "lecture.pdf");
        doc.document_id = Some("kbd_1".into());
        doc.page = Some(12);
        assert_eq!(source_line(&doc), "[1] lecture.pdf, p. 12");
        doc.section = Some("3 Limits › 3.2 One-sided".into());
        assert_eq!(
            source_line(&doc),
            "[1] lecture.pdf, p. 12 · 3 Limits › 3.2 One-sided"
        );
        let mut web = source(2, "Quadratic formula");
        web.url = Some("https://example.org/q".into());
        assert_eq!(
            source_line(&web),
            "[2] Quadratic formula <https://example.org/q>"
        );
    }
}
