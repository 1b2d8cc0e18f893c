//! The knowledge tools, offered exactly when a turn has material (knowledge bases or
//! attachments, `Policy::WithMaterial`): `rag` searches the turn's knowledge bases and numbers
//! every passage it returns through the turn's citations; `read_source` reads a document of
//! the turn's material page by page. Both reach only the turn's material (its
//! `ToolContext.material`), never another knowledge base of the user, whatever the model asks.

pub mod rag;
pub mod read_source;

use std::sync::Arc;

use crate::toolset::{Deps, Unavailable};
use deepsolve_core::{Language, Material, MaterialKb, ToolContext, ToolError, ToolRef};

pub use rag::RAG;
pub use read_source::READ_SOURCE;

/// The longest excerpt a source carries (for a hover card).
pub(crate) const EXCERPT_CHARS: usize = 800;

/// The catalog's factory of `rag`.
pub(crate) fn build_rag(deps: &Deps) -> Result<ToolRef, Unavailable> {
    Ok(Arc::new(rag::RagTool::new(deps.knowledge.clone()?)))
}

/// The catalog's factory of `read_source`.
pub(crate) fn build_read_source(deps: &Deps) -> Result<ToolRef, Unavailable> {
    Ok(Arc::new(read_source::ReadSourceTool::new(
        deps.knowledge.clone()?,
    )))
}

/// The turn's material and user, or the error a turn without them gets.
pub(crate) fn turn_material(ctx: &ToolContext) -> Result<(&Material, &str), ToolError> {
    let words = Words::of(ctx.language);
    let material = ctx
        .material
        .as_deref()
        .ok_or_else(|| ToolError::actionable(words.no_material))?;
    let user = ctx
        .user_id
        .as_deref()
        .ok_or_else(|| ToolError::internal("the turn has no user to read knowledge bases as"))?;
    Ok((material, user))
}

/// How a knowledge base is named to the model: its name and id.
pub(crate) fn kb_label(kb: &MaterialKb) -> String {
    format!("{} ({})", kb.name, kb.id)
}

/// Every line of `text` quoted with `> `, so a document's text reads as material, not as
/// the tool's own words.
pub(crate) fn quoted(text: &str) -> String {
    text.trim_end()
        .lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_string()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first `EXCERPT_CHARS` characters of a passage, whitespace collapsed.
pub(crate) fn excerpt(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= EXCERPT_CHARS {
        flat
    } else {
        let mut cut: String = flat.chars().take(EXCERPT_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

/// The fixed words of the knowledge tools, per language.
pub(crate) struct Words {
    pub(crate) page: &'static str,
    pub(crate) source: &'static str,
    pub(crate) no_material: &'static str,
    pub(crate) no_hits: &'static str,
    pub(crate) chars: &'static str,
    pub(crate) of: &'static str,
    pub(crate) next: &'static str,
    pub(crate) end: &'static str,
}

impl Words {
    pub(crate) fn of(language: Language) -> &'static Words {
        match language {
            Language::En => &EN,
            Language::Zh => &ZH,
        }
    }

    /// `p. 12` / `第 12 页`.
    pub(crate) fn page_label(&self, page: u32) -> String {
        self.page.replace("{n}", &page.to_string())
    }
}

const EN: Words = Words {
    page: "p. {n}",
    source: "source",
    no_material: "this turn has no knowledge bases or attached documents to read",
    no_hits: "no passage matches; try other words, or read a document with read_source",
    chars: "characters",
    of: "of",
    next: "next page: read_source with offset",
    end: "end of the document",
};

const ZH: Words = Words {
    page: "第 {n} 页",
    source: "来源",
    no_material: "本轮没有可读的知识库或附件",
    no_hits: "没有匹配的段落；换个说法再试，或用 read_source 阅读文档",
    chars: "字符",
    of: "共",
    next: "下一页：read_source，offset 为",
    end: "文档结束",
};

/// `name (id), name (id)` of the material's knowledge bases, or "none".
pub(crate) fn kb_list(material: &Material) -> String {
    let names: Vec<String> = material.knowledge_bases.iter().map(kb_label).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

pub(crate) fn knowledge_error(e: deepsolve_kb::KbError) -> ToolError {
    ToolError::internal(format!("knowledge base: {e}"))
}
