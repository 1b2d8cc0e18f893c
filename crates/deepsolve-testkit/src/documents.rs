//! Fixture documents, written by the tests themselves: a minimal PDF writer (Helvetica for
//! English, a Type0/Identity-H font with a ToUnicode map for Chinese), a minimal DOCX (OOXML in
//! a zip), HTML with boilerplate around an article, and the hostile variants (a zip-bomb DOCX,
//! a PDF of 10 000 pages, a malformed PDF, one whose font crashes the parser).
//!
//! Writing into a `Vec` cannot fail; the few `Result`s on the way are dropped rather than
//! unwrapped, and a zip that could not be written comes back empty (a test then fails loudly
//! on an unreadable document).

use std::io::{Cursor, Write};

/// A page of a generated PDF.
pub enum PdfPage<'a> {
    /// Lines of ASCII text in Helvetica.
    English(&'a [&'a str]),
    /// Lines of Chinese text in a CID font (CID = Unicode code point, mapped by ToUnicode).
    Chinese(&'a [&'a str]),
    /// English text followed by text in a Type0 font without its descendant font: pdf-extract
    /// panics on it; poppler skips the broken text and keeps the rest.
    BrokenFont(&'a [&'a str]),
}

/// Object numbers: 1 catalog, 2 pages, 3 Helvetica, 4 CJK Type0, 5 its CIDFont, 6 its
/// descriptor, 7 its ToUnicode, 8 the broken Type0; pages and contents from 9.
pub fn pdf(pages: &[PdfPage<'_>]) -> Vec<u8> {
    let mut objects: Vec<Vec<u8>> = Vec::new();
    let first_page = 9;
    let kids: Vec<String> = (0..pages.len())
        .map(|i| format!("{} 0 R", first_page + 2 * i))
        .collect();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    objects.push(
        format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            kids.join(" "),
            pages.len()
        )
        .into_bytes(),
    );
    objects.push(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    );
    objects.push(
        b"<< /Type /Font /Subtype /Type0 /BaseFont /FixtureSong /Encoding /Identity-H \
          /DescendantFonts [5 0 R] /ToUnicode 7 0 R >>"
            .to_vec(),
    );
    objects.push(
        b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /FixtureSong \
          /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> \
          /FontDescriptor 6 0 R /DW 1000 /CIDToGIDMap /Identity >>"
            .to_vec(),
    );
    objects.push(
        b"<< /Type /FontDescriptor /FontName /FixtureSong /Flags 4 /FontBBox [0 -200 1000 900] \
          /ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 700 /StemV 80 >>"
            .to_vec(),
    );
    let chinese: Vec<char> = pages
        .iter()
        .flat_map(|p| match p {
            PdfPage::Chinese(lines) => lines.iter().flat_map(|l| l.chars()).collect(),
            _ => Vec::new(),
        })
        .collect();
    objects.push(stream(&to_unicode(&chinese)));
    objects.push(
        b"<< /Type /Font /Subtype /Type0 /BaseFont /Broken /Encoding /Identity-H >>".to_vec(),
    );
    for (i, page) in pages.iter().enumerate() {
        let contents = first_page + 2 * i + 1;
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
                 /Resources << /Font << /F1 3 0 R /F2 4 0 R /F3 8 0 R >> >> /Contents {contents} 0 R >>"
            )
            .into_bytes(),
        );
        objects.push(stream(&page_content(page)));
    }
    objects.push(b"<< /Title (Lecture 3: Integration by Parts) >>".to_vec());
    write_pdf(&objects, Some(objects.len()))
}

/// A PDF whose page tree really holds `n` (empty) pages.
pub fn many_pages_pdf(n: usize) -> Vec<u8> {
    let mut objects: Vec<Vec<u8>> = Vec::new();
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 3 + i)).collect();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")).into_bytes());
    for _ in 0..n {
        objects.push(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>".to_vec());
    }
    write_pdf(&objects, None)
}

fn page_content(page: &PdfPage<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match page {
        PdfPage::English(lines) => {
            text_lines(&mut out, "F1", lines, |l| format!("({})", escape(l)))
        }
        PdfPage::Chinese(lines) => text_lines(&mut out, "F2", lines, |l| {
            let hex: String = l.chars().map(|c| format!("{:04X}", c as u32)).collect();
            format!("<{hex}>")
        }),
        PdfPage::BrokenFont(lines) => {
            text_lines(&mut out, "F1", lines, |l| format!("({})", escape(l)));
            out.extend_from_slice(b"BT /F3 12 Tf 72 100 Td <00410042> Tj ET\n");
        }
    }
    out
}

fn text_lines(out: &mut Vec<u8>, font: &str, lines: &[&str], show: impl Fn(&str) -> String) {
    let _ = writeln!(out, "BT /{font} 12 Tf 16 TL 72 720 Td");
    for line in lines {
        let _ = writeln!(out, "{} Tj T*", show(line));
    }
    out.extend_from_slice(b"ET\n");
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('(', "\\(")
        .replace(')', "\\)")
}

fn stream(data: &[u8]) -> Vec<u8> {
    let mut obj = format!("<< /Length {} >>\nstream\n", data.len()).into_bytes();
    obj.extend_from_slice(data);
    obj.extend_from_slice(b"\nendstream");
    obj
}

/// A ToUnicode CMap mapping each used CID (its own code point) to that character.
fn to_unicode(chars: &[char]) -> Vec<u8> {
    let mut chars: Vec<char> = chars.to_vec();
    chars.sort_unstable();
    chars.dedup();
    let mut cmap = String::from(
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n\
         /CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n\
         /CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n\
         1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n",
    );
    for block in chars.chunks(100) {
        cmap.push_str(&format!("{} beginbfchar\n", block.len()));
        for c in block {
            cmap.push_str(&format!("<{0:04X}> <{0:04X}>\n", *c as u32));
        }
        cmap.push_str("endbfchar\n");
    }
    cmap.push_str("endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n");
    cmap.into_bytes()
}

/// Header, numbered objects, cross-reference table, trailer.
fn write_pdf(objects: &[Vec<u8>], info: Option<usize>) -> Vec<u8> {
    let mut out = b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, obj) in objects.iter().enumerate() {
        offsets.push(out.len());
        let _ = writeln!(out, "{} 0 obj", i + 1);
        out.extend_from_slice(obj);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    let _ = write!(out, "xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for offset in offsets {
        let _ = writeln!(out, "{offset:010} 00000 n ");
    }
    let _ = write!(
        out,
        "trailer\n<< /Size {} /Root 1 0 R {} >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1,
        info.map_or_else(String::new, |n| format!("/Info {n} 0 R"))
    );
    out
}

/// A paragraph of a generated DOCX: its style id (if any) and its text; `None` text is a
/// page break.
pub struct Para<'a>(pub Option<&'a str>, pub Option<&'a str>);

const STYLES_XML: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>
<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="heading 2"/></w:style>
<w:style w:type="paragraph" w:styleId="Normal"><w:name w:val="Normal"/></w:style>
</w:styles>"#;

/// A minimal DOCX: content types, the main part, styles (localised ids, as a German Word
/// writes them, so headings must be found by style name), and core properties with a title.
pub fn docx(paras: &[Para<'_>], title: Option<&str>) -> Vec<u8> {
    let mut body = String::new();
    for Para(style, text) in paras {
        match text {
            None => body.push_str(r#"<w:p><w:r><w:br w:type="page"/></w:r></w:p>"#),
            Some(text) => {
                body.push_str("<w:p>");
                if let Some(style) = style {
                    body.push_str(&format!(r#"<w:pPr><w:pStyle w:val="{style}"/></w:pPr>"#));
                }
                body.push_str(&format!(
                    "<w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>",
                    xml_escape(text)
                ));
            }
        }
    }
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    );
    let mut parts = vec![
        ("[Content_Types].xml", CONTENT_TYPES.to_owned()),
        ("word/document.xml", document),
        ("word/styles.xml", STYLES_XML.to_owned()),
    ];
    if let Some(title) = title {
        parts.push((
            "docProps/core.xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{}</dc:title></cp:coreProperties>"#,
                xml_escape(title)
            ),
        ));
    }
    zip_of(parts.iter().map(|(n, c)| (*n, c.as_bytes())))
}

const CONTENT_TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A deflated zip of `parts` (name, bytes).
pub fn zip_of<'a>(parts: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    try_zip(parts).unwrap_or_default()
}

fn try_zip<'a>(
    parts: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in parts {
        zip.start_file(name, options)?;
        zip.write_all(bytes)?;
    }
    Ok(zip.finish()?.into_inner())
}

/// A DOCX whose `word/document.xml` inflates to `inflated` bytes of a repeated paragraph.
pub fn bomb_docx(inflated: usize) -> Vec<u8> {
    let para = b"<w:p><w:r><w:t>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa</w:t></w:r></w:p>";
    let body: Vec<u8> = para.iter().copied().cycle().take(inflated).collect();
    zip_of([
        ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
        ("word/document.xml", &body[..]),
    ])
}

/// Rewrites every declared uncompressed size (local headers and central directory) to
/// `size`: a zip that lies about what it inflates to.
pub fn lie_about_sizes(mut zip: Vec<u8>, size: u32) -> Vec<u8> {
    let patch = |zip: &mut Vec<u8>, signature: &[u8; 4], field: usize| {
        let mut i = 0;
        while i + field + 4 <= zip.len() {
            if &zip[i..i + 4] == signature {
                zip[i + field..i + field + 4].copy_from_slice(&size.to_le_bytes());
                i += 4;
            } else {
                i += 1;
            }
        }
    };
    patch(&mut zip, b"PK\x03\x04", 22);
    patch(&mut zip, b"PK\x01\x02", 24);
    zip
}

/// A news-site page: navigation, a sidebar and a footer around a two-section article.
pub fn html_article() -> String {
    let para = |topic: &str| {
        format!(
            "<p>The {topic} is treated here at length, because a student who reads the lecture notes \
             should find every step of the argument spelled out, with the reasons for each step \
             and the common mistakes that appear in examinations year after year.</p>"
        )
    };
    format!(
        r#"<!DOCTYPE html><html><head><title>Integration by Parts | Maths Site</title></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/login">Log in</a></li><li><a href="/shop">Shop our merchandise</a></li></ul></nav>
<div class="sidebar"><h3>Advertisement</h3><p>Buy cheap calculators now!</p></div>
<article>
<h1>Integration by Parts</h1>
{}
<h2>The formula</h2>
{}
{}
<h2>Worked example</h2>
{}
{}
</article>
<footer><p>Copyright 2026 Maths Site. All rights reserved. Cookie policy.</p></footer>
</body></html>"#,
        para("product rule"),
        para("formula"),
        para("choice of u and dv"),
        para("example of x times e to the x"),
        para("tabular method"),
    )
}

/// A PDF of `n` pages of English text; page `i` (1-based) says "page i" and talks about a
/// topic of its own (`PAGE_TOPICS`, cycled), so a search can find one page.
pub fn text_pdf(n: usize) -> Vec<u8> {
    let texts: Vec<Vec<String>> = (1..=n)
        .map(|i| {
            let topic = PAGE_TOPICS[(i - 1) % PAGE_TOPICS.len()];
            vec![
                format!("Page {i} of the lecture notes."),
                format!("This page explains {topic} with a worked example."),
                format!("Remember the rule of {topic} for the examination."),
            ]
        })
        .collect();
    let lines: Vec<Vec<&str>> = texts
        .iter()
        .map(|t| t.iter().map(String::as_str).collect())
        .collect();
    let pages: Vec<PdfPage<'_>> = lines.iter().map(|l| PdfPage::English(l)).collect();
    pdf(&pages)
}

/// The topics of [`text_pdf`]'s pages, in page order.
pub const PAGE_TOPICS: &[&str] = &[
    "integration by parts",
    "the chain rule",
    "l'Hopital's rule",
    "Taylor series",
    "improper integrals",
];

/// A PDF of two Chinese pages (a CID font with a ToUnicode map).
pub fn chinese_pdf() -> Vec<u8> {
    pdf(&[
        PdfPage::Chinese(&["分部积分法", "设函数可导，则有分部积分公式。"]),
        PdfPage::Chinese(&["换元积分法", "第二类换元法用于根式的积分。"]),
    ])
}

/// A PDF whose second page uses a font the in-process parser panics on.
pub fn broken_font_pdf() -> Vec<u8> {
    pdf(&[
        PdfPage::English(&["Integration by parts is the product rule read backwards."]),
        PdfPage::BrokenFont(&["Page two survives in poppler."]),
    ])
}

/// Starts like a PDF and is not one: every parser refuses it.
pub fn malformed_pdf() -> Vec<u8> {
    b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R\nthis is not a PDF at all\n".to_vec()
}

/// A DOCX of lecture notes: a title, two headed sections, a page break between them.
pub fn lecture_docx() -> Vec<u8> {
    docx(
        &[
            Para(Some("Title"), Some("Series and Sequences")),
            Para(Some("berschrift1"), Some("Convergence tests")),
            Para(
                None,
                Some(
                    "The ratio test compares consecutive terms of a series to decide convergence.",
                ),
            ),
            Para(None, None),
            Para(Some("berschrift1"), Some("Power series")),
            Para(
                None,
                Some(
                    "A power series converges inside its radius of convergence and diverges outside.",
                ),
            ),
        ],
        Some("Series and Sequences"),
    )
}

/// Markdown notes with two sections.
pub fn notes_markdown() -> String {
    "# Linear algebra\n\n## Eigenvalues\n\nAn eigenvector of a matrix keeps its direction under \
     the matrix; its eigenvalue is the factor it is stretched by.\n\n## Determinants\n\nThe \
     determinant of a matrix is the factor by which it scales volumes.\n"
        .to_string()
}
