//! `read_source {source_id, offset?, max_chars?}`: a window of a document of the turn's
//! material, from its whole extracted text (not from the overlapping chunks), with where the
//! next window starts; the window is numbered as one source (the document at that page) so
//! the model can cite what it read.

use async_trait::async_trait;
use deepsolve_core::{
    Language, Material, Source, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use deepsolve_kb::{KbError, Knowledge, SourceText};
use serde_json::{Value, json};

use super::{Words, excerpt, knowledge_error, quoted, turn_material};
use crate::toolset::PlaybookLine;

pub const READ_SOURCE: &str = "read_source";

/// Characters read when the call does not say, and the most one call may ask for.
pub const DEFAULT_MAX_CHARS: usize = 8_000;
pub const MAX_CHARS: usize = 20_000;
/// Documents an "unknown source" error lists.
const LISTED: usize = 20;

/// Its line in the playbook.
pub(crate) const PLAYBOOK: PlaybookLine = PlaybookLine {
    en: "`read_source`: read a document of the knowledge bases page by page (its source id from rag or the material list); cite it as [n]",
    zh: "`read_source`：逐页阅读知识库中的文档（来源 id 取自 rag 或材料清单）；引用时写 [n]",
};

pub struct ReadSourceTool {
    spec: ToolSpec,
    knowledge: Knowledge,
}

impl ReadSourceTool {
    pub fn new(knowledge: Knowledge) -> Self {
        ReadSourceTool {
            spec: ToolSpec {
                name: READ_SOURCE.into(),
                description: "Read a document of this turn's knowledge bases or attachments, a window of its text at a time. Returns the text and where the next window starts.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "source_id": {"type": "string", "minLength": 1, "description": "The document's id (the `source` of a rag passage, or from the material list)."},
                        "offset": {"type": "integer", "minimum": 0, "description": "Where to start, in characters (default 0; a previous call says where the next window starts)."},
                        "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_CHARS, "description": "How much to read (default 8000)."}
                    },
                    "required": ["source_id"],
                    "additionalProperties": false
                }),
            },
            knowledge,
        }
    }

    /// The knowledge base of `id` when the turn may read it: a document its material lists,
    /// or one of a knowledge base its material lists (added since the material was taken).
    async fn readable(&self, material: &Material, user: &str, id: &str) -> Option<String> {
        if let Some(doc) = material.documents.iter().find(|d| d.id == id) {
            return Some(doc.kb.clone());
        }
        match self.knowledge.store().kb_document(id, user).await {
            Ok(Some(doc)) if material.knowledge_bases.iter().any(|k| k.id == doc.kb_id) => {
                Some(doc.kb_id)
            }
            _ => None,
        }
    }
}

/// "unknown source 'x' (attached: lecture.pdf (kbd_1), …)".
fn unknown_source(material: &Material, id: &str, language: Language) -> ToolError {
    let mut listed: Vec<String> = material
        .documents
        .iter()
        .take(LISTED)
        .map(|d| format!("{} ({})", d.name, d.id))
        .collect();
    if material.documents.len() > LISTED {
        listed.push(format!("… {} more", material.documents.len() - LISTED));
    }
    let listed = if listed.is_empty() {
        "none".to_string()
    } else {
        listed.join(", ")
    };
    ToolError::actionable(match language {
        Language::En => format!(
            "unknown source '{id}' (attached: {listed}); use a document id from this list or from a rag passage"
        ),
        Language::Zh => {
            format!("未知的来源 '{id}'（可用：{listed}）；请使用此列表或 rag 段落中的文档 id")
        }
    })
}

/// `[2] lecture.pdf · p. 3 · characters 0–8000 of 23145 · next page: read_source with offset 8000`.
fn header(n: u32, read: &SourceText, words: &Words) -> String {
    let mut head = format!("[{n}] {}", read.name);
    if let Some(page) = read.page {
        head.push_str(" · ");
        head.push_str(&words.page_label(page));
    }
    let end = read.offset + read.text.chars().count();
    head.push_str(&format!(
        " · {} {}–{end} {} {}",
        words.chars, read.offset, words.of, read.total_chars
    ));
    match read.next_offset {
        Some(next) => head.push_str(&format!(" · {} {next}", words.next)),
        None => head.push_str(&format!(" · {}", words.end)),
    }
    head
}

#[async_trait]
impl Tool for ReadSourceTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (material, user) = turn_material(ctx)?;
        let words = Words::of(ctx.language);
        let id = args["source_id"].as_str().unwrap_or_default().trim();
        let Some(kb) = self.readable(material, user, id).await else {
            return Err(unknown_source(material, id, ctx.language));
        };
        let offset = args["offset"]
            .as_u64()
            .map_or(0, |o| usize::try_from(o).unwrap_or(usize::MAX));
        let max_chars = args["max_chars"].as_u64().map_or(DEFAULT_MAX_CHARS, |m| {
            usize::try_from(m).unwrap_or(MAX_CHARS).clamp(1, MAX_CHARS)
        });
        let read = match self.knowledge.read(user, id, offset, max_chars).await {
            Ok(read) => read,
            Err(KbError::UnknownDocument(_)) => {
                return Err(unknown_source(material, id, ctx.language));
            }
            Err(e) => return Err(knowledge_error(e)),
        };
        let source = ctx.citations.register(Source {
            n: 0,
            title: read.name.clone(),
            url: None,
            kb: Some(kb),
            document_id: Some(id.to_string()),
            page: read.page,
            chunk_id: None,
            score: None,
            section: None,
            excerpt: Some(excerpt(&read.text)),
        });
        let content = format!("{}\n{}", header(source.n, &read, words), quoted(&read.text));
        Ok(ToolOutput {
            sources: vec![source],
            ..ToolOutput::ok(content)
        })
    }
}
