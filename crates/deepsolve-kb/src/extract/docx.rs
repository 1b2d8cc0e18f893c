//! DOCX: the paragraphs of `word/document.xml`, headings written as Markdown `#` lines.
//!
//! A DOCX is a zip, and a zip can declare small sizes and inflate to gigabytes. Three guards:
//! the number of entries, the size each part declares, and the bytes actually inflated (read
//! through a cap one past the limit, so a lying header costs no more than the limit).
//! Headings come from paragraph styles: a style whose name is `heading N` (Word's built-in
//! names, the same in every UI language) or that carries an outline level.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::{ExtractError, Extracted, Kind, Limits, Markup, Page, stem_title};

const DOCUMENT: &str = "word/document.xml";
const STYLES: &str = "word/styles.xml";
const CORE: &str = "docProps/core.xml";

type Archive<'a> = zip::ZipArchive<Cursor<&'a [u8]>>;

pub(super) fn extract(
    name: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extracted, ExtractError> {
    let docx_err = |reason: String| ExtractError::Docx {
        name: name.to_owned(),
        reason,
    };
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| docx_err(e.to_string()))?;
    if archive.len() > limits.max_zip_entries {
        return Err(ExtractError::ZipBomb {
            name: name.to_owned(),
            reason: format!(
                "{} entries (limit {})",
                archive.len(),
                limits.max_zip_entries
            ),
        });
    }
    let document = read_part(&mut archive, name, DOCUMENT, limits)?
        .ok_or_else(|| docx_err(format!("no {DOCUMENT}")))?;
    let styles = match read_part(&mut archive, name, STYLES, limits)? {
        Some(xml) => heading_styles(&xml).map_err(docx_err)?,
        None => Styles::default(),
    };
    let core_title = read_part(&mut archive, name, CORE, limits)?.and_then(|xml| core_title(&xml));
    let body = paragraphs(&document, &styles).map_err(docx_err)?;
    let title = core_title
        .or(body.title)
        .unwrap_or_else(|| stem_title(name));
    let pages = body
        .pages
        .into_iter()
        .zip(1..)
        .map(|(text, number)| Page { number, text })
        .collect();
    Ok(Extracted {
        kind: Kind::Docx,
        title,
        markup: Markup::Markdown,
        pages,
    })
}

/// One part of the zip as UTF-8, or `None` when it is absent; refused when it declares or
/// inflates to more than the limit.
fn read_part(
    archive: &mut Archive<'_>,
    name: &str,
    part: &str,
    limits: &Limits,
) -> Result<Option<String>, ExtractError> {
    let bomb = |reason: String| ExtractError::ZipBomb {
        name: name.to_owned(),
        reason,
    };
    let cap = limits.max_inflated_bytes;
    let entry = match archive.by_name(part) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => {
            return Err(ExtractError::Docx {
                name: name.to_owned(),
                reason: format!("{part}: {e}"),
            });
        }
    };
    if entry.size() > cap {
        return Err(bomb(format!(
            "{part} declares {} bytes (limit {cap})",
            entry.size()
        )));
    }
    let declared = entry.size();
    let mut bytes = Vec::new();
    if let Err(e) = entry.take(cap.saturating_add(1)).read_to_end(&mut bytes) {
        // The zip reader stops an entry at its declared size with InvalidData: a lying header.
        if e.kind() == std::io::ErrorKind::InvalidData && e.to_string().contains("declared") {
            return Err(bomb(format!(
                "{part} inflates past its declared {declared} bytes"
            )));
        }
        return Err(ExtractError::Docx {
            name: name.to_owned(),
            reason: format!("{part}: {e}"),
        });
    }
    if bytes.len() as u64 > cap {
        return Err(bomb(format!("{part} inflates past {cap} bytes")));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ExtractError::Docx {
            name: name.to_owned(),
            reason: format!("{part} is not UTF-8"),
        })
}

/// Paragraph style ids that are headings, with their level (1 = top), and the title style.
#[derive(Default)]
struct Styles {
    levels: HashMap<String, usize>,
    titles: Vec<String>,
}

impl Styles {
    /// Without a styles part, Word's English built-in ids are the best guess.
    fn level(&self, id: &str) -> Option<usize> {
        self.levels.get(id).copied().or_else(|| {
            let n = id.strip_prefix("Heading")?.parse::<usize>().ok()?;
            (1..=9).contains(&n).then_some(n)
        })
    }

    fn is_title(&self, id: &str) -> bool {
        self.titles.iter().any(|t| t == id) || id == "Title"
    }
}

fn heading_styles(xml: &str) -> Result<Styles, String> {
    let mut reader = Reader::from_str(xml);
    let mut styles = Styles::default();
    let mut current: Option<String> = None;
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            Event::Start(e) | Event::Empty(e) => match e.local_name().as_ref() {
                "style" => current = attr(&e, "styleId"),
                "name" => {
                    let (Some(id), Some(style_name)) = (&current, attr(&e, "val")) else {
                        continue;
                    };
                    let lower = style_name.to_ascii_lowercase();
                    if let Some(n) = lower.strip_prefix("heading ").and_then(|n| n.parse().ok()) {
                        styles.levels.insert(id.clone(), n);
                    } else if lower == "title" {
                        styles.titles.push(id.clone());
                    }
                }
                "outlineLvl" => {
                    let level = attr(&e, "val").and_then(|v| v.parse::<usize>().ok());
                    if let (Some(id), Some(level)) = (&current, level) {
                        styles.levels.entry(id.clone()).or_insert(level + 1);
                    }
                }
                _ => {}
            },
            Event::Eof => return Ok(styles),
            _ => {}
        }
    }
}

/// The text of the body, split into pages at explicit page breaks.
struct Body {
    pages: Vec<String>,
    title: Option<String>,
}

/// What the paragraph being read has so far.
#[derive(Default)]
struct Paragraph {
    text: String,
    style: Option<String>,
    in_text: bool,
}

fn paragraphs(xml: &str, styles: &Styles) -> Result<Body, String> {
    let mut reader = Reader::from_str(xml);
    let mut body = Body {
        pages: vec![String::new()],
        title: None,
    };
    let mut para = Paragraph::default();
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            Event::Start(e) => match e.local_name().as_ref() {
                "p" => para = Paragraph::default(),
                "t" => para.in_text = true,
                _ => {}
            },
            Event::Empty(e) => match e.local_name().as_ref() {
                "pStyle" => para.style = attr(&e, "val"),
                "tab" => para.text.push('\t'),
                "br" if attr(&e, "type").as_deref() == Some("page") => {
                    finish_paragraph(&mut body, &mut para, styles);
                    body.pages.push(String::new());
                }
                "br" | "cr" => para.text.push('\n'),
                _ => {}
            },
            Event::Text(t) if para.in_text => para.text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if para.in_text => para.text.push_str(&resolve_ref(&r)),
            Event::End(e) => match e.local_name().as_ref() {
                "t" => para.in_text = false,
                "p" => finish_paragraph(&mut body, &mut para, styles),
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    while body.pages.len() > 1 && body.pages.last().is_some_and(|p| p.trim().is_empty()) {
        body.pages.pop();
    }
    Ok(body)
}

/// Appends the paragraph to the current page: a heading as `#` times its level, then a blank
/// line, so the chunker sees paragraphs.
fn finish_paragraph(body: &mut Body, para: &mut Paragraph, styles: &Styles) {
    let para = std::mem::take(para);
    let text = para.text.trim();
    if text.is_empty() {
        return;
    }
    let style = para.style.as_deref().unwrap_or_default();
    let level = if styles.is_title(style) {
        body.title.get_or_insert_with(|| text.to_owned());
        Some(1)
    } else {
        styles.level(style)
    };
    let Some(page) = body.pages.last_mut() else {
        return;
    };
    if let Some(level) = level {
        // A heading is one line: a soft break inside it would end it early.
        let one_line = text.replace('\n', " ");
        page.push_str(&"#".repeat(level.clamp(1, 6)));
        page.push(' ');
        page.push_str(&one_line);
    } else {
        page.push_str(text);
    }
    page.push_str("\n\n");
}

/// `&amp;` and friends, and `&#…;` character references; an unknown entity is kept as written.
fn resolve_ref(r: &quick_xml::events::BytesRef<'_>) -> String {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return c.to_string();
    }
    quick_xml::escape::resolve_xml_entity(r).map_or_else(|| format!("&{};", &**r), str::to_owned)
}

fn attr(e: &BytesStart<'_>, local: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == local)
        .and_then(|a| {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()
                .map(|v| v.into_owned())
        })
}

/// `dc:title` of `docProps/core.xml`, when set.
fn core_title(xml: &str) -> Option<String> {
    let mut reader = Reader::from_str(xml);
    let mut in_title = false;
    let mut title = String::new();
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) if e.local_name().as_ref() == "title" => in_title = true,
            Event::Text(t) if in_title => title.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_title => title.push_str(&resolve_ref(&r)),
            Event::End(e) if e.local_name().as_ref() == "title" => break,
            Event::Eof => break,
            _ => {}
        }
    }
    let title = title.trim();
    (!title.is_empty()).then(|| title.to_owned())
}
