//! The material manifest of the system prompt: the knowledge bases a turn may search and their
//! documents — where to look, never what they say (the tools read them). Rendered once per
//! turn, so it is part of the byte-stable system message.

use deepsolve_protocol::{Material, MaterialDocument, MaterialKb};

use crate::texts::{Text, Texts};

/// At most this many documents are listed per knowledge base; `rag` finds the others.
pub(crate) const MAX_LISTED_DOCUMENTS: usize = 40;

/// The longest name shown: a name is the user's data, not an instruction or a layout.
const MAX_NAME_CHARS: usize = 120;

/// The manifest for `material`, starting with a blank line (it follows the playbook);
/// `None` when there is nothing to list.
pub(crate) fn manifest(material: &Material, texts: &Texts) -> Option<String> {
    if material.knowledge_bases.is_empty() {
        return None;
    }
    let mut out = format!("\n{}\n", texts.get(Text::MaterialHeader));
    for kb in &material.knowledge_bases {
        out.push('\n');
        out.push_str(&kb_lines(kb, material, texts));
    }
    Some(out)
}

/// One knowledge base: its line, its first documents, and how many more it holds. Documents
/// of a knowledge base not in the list are not shown (the tools cannot reach them either).
fn kb_lines(kb: &MaterialKb, material: &Material, texts: &Texts) -> String {
    let documents: Vec<&MaterialDocument> = material.documents_of(&kb.id).collect();
    let total = documents.len().max(kb.documents as usize);
    let head = if kb.attachments {
        texts.render(Text::MaterialAttachments, &[("documents", &total)])
    } else {
        texts.render(
            Text::MaterialKb,
            &[("name", &clean(&kb.name)), ("documents", &total)],
        )
    };
    let mut lines = vec![head];
    lines.extend(
        documents
            .iter()
            .take(MAX_LISTED_DOCUMENTS)
            .map(|d| document_line(d, texts)),
    );
    let listed = documents.len().min(MAX_LISTED_DOCUMENTS);
    if total > listed {
        lines.push(texts.render(Text::MaterialMore, &[("count", &(total - listed))]));
    }
    lines.join("\n")
}

fn document_line(d: &MaterialDocument, texts: &Texts) -> String {
    let mut details = vec![clean(&d.kind)];
    if let Some(pages) = d.pages {
        details.push(texts.render(Text::MaterialPages, &[("pages", &pages)]));
    }
    details.push(size(d.size));
    texts.render(
        Text::MaterialDocument,
        &[
            ("name", &clean(&d.name)),
            ("details", &details.join(" · ")),
            ("id", &clean(&d.id)),
        ],
    )
}

/// A name on one line, without control characters or backticks, at most
/// [`MAX_NAME_CHARS`] characters.
pub(crate) fn clean(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_control() || c == '`' { ' ' } else { c })
        .take(MAX_NAME_CHARS)
        .collect();
    if name.chars().count() > MAX_NAME_CHARS {
        out.push('…');
    }
    out.trim().to_string()
}

/// A size in bytes as people read it (`812 B`, `12.4 KB`, `3.1 MB`): the same in every
/// language.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::Language;

    fn kb(id: &str, name: &str, documents: u32, attachments: bool) -> MaterialKb {
        MaterialKb {
            id: id.into(),
            name: name.into(),
            documents,
            attachments,
        }
    }

    fn doc(kb: &str, i: usize) -> MaterialDocument {
        MaterialDocument {
            id: format!("doc_{kb}_{i}"),
            name: format!("chapter {i}.pdf"),
            kind: "pdf".into(),
            pages: Some(12),
            size: 2_560,
            kb: kb.into(),
            attached: false,
        }
    }

    fn material(listed: usize, held: u32) -> Material {
        Material {
            knowledge_bases: vec![kb("kb_n", "notes", held, false), kb("kb_a", "", 1, true)],
            documents: (0..listed)
                .map(|i| doc("kb_n", i))
                .chain([MaterialDocument {
                    name: "hw\n`1`.md".into(),
                    kind: "markdown".into(),
                    pages: None,
                    size: 300,
                    attached: true,
                    ..doc("kb_a", 0)
                }])
                .collect(),
        }
    }

    #[test]
    fn lists_knowledge_bases_and_documents_without_contents() {
        let en = Texts::builtin(Language::En);
        let text = manifest(&material(2, 2), &en).expect("a manifest");
        assert!(text.starts_with("\n# Material\n"), "{text}");
        assert!(
            text.contains("- Knowledge base `notes` (2 documents):"),
            "{text}"
        );
        assert!(
            text.contains("  - chapter 1.pdf · pdf · 12 pages · 2.5 KB (source `doc_kb_n_1`)"),
            "{text}"
        );
        assert!(text.contains("- Files attached to this question (1 documents):"));
        assert!(text.contains("  - hw  1 .md · markdown · 300 B (source `doc_kb_a_0`)"));
        assert!(!text.contains("more"), "{text}");
        let zh = manifest(&material(2, 2), &Texts::builtin(Language::Zh)).expect("zh");
        assert!(zh.contains("知识库 `notes`（2 份文档）"), "{zh}");
        assert!(zh.contains("共 12 页"), "{zh}");
    }

    #[test]
    fn at_most_forty_documents_per_knowledge_base_then_how_many_more() {
        let en = Texts::builtin(Language::En);
        let text = manifest(&material(45, 300), &en).expect("a manifest");
        assert!(text.contains("chapter 39.pdf") && !text.contains("chapter 40.pdf"));
        assert!(
            text.contains("  - … and 260 more (a search of the knowledge bases finds them)"),
            "{text}"
        );
        assert!(text.contains("(300 documents)"), "{text}");
    }

    #[test]
    fn nothing_to_list_is_no_manifest() {
        let en = Texts::builtin(Language::En);
        assert_eq!(manifest(&Material::default(), &en), None);
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(812), "812 B");
        assert_eq!(size(12_700), "12.4 KB");
        assert_eq!(size(3_250_000), "3.1 MB");
    }
}
