//! What tool calls leave behind for the turn record: files and citation sources; how a call
//! is shown.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A file a tool produced in the turn's workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Artifact {
    /// Relative to the turn's workspace.
    pub path: String,
    pub size: u64,
    pub mime: String,
    /// The stored copy's id, when the server stored the file as the call ended (the web UI
    /// shows it while the turn runs); absent otherwise (the CLI, or a file not stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Where the stored copy downloads (`/api/v1/artifacts/{id}`; `…/inline` shows an image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Set only for a file deepsolve drew itself (a `geogebra_analysis` figure), never for
    /// a file found in the workspace: the SHA-256 (hex) of the bytes it wrote. The server
    /// shows such an SVG in the page only when the bytes it stores still have this hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered_sha256: Option<String>,
}

/// The SHA-256 of `bytes`, in lowercase hex: the one hash helper of the workspace (a drawn
/// figure's [`Artifact::rendered_sha256`], a stored token's hash).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The argument of a tool's calls a front end shows first (the code it runs, the query, the
/// URL), and how: the CLI's and the web UI's tool cards read it here, never from a tool name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShownArgument {
    /// The argument's name in the call's `args` (`code`, `command`, `query`, …).
    pub name: String,
    /// The language to highlight it as (`python`, `bash`); absent: plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// A citation source a tool result refers to (a retrieved chunk, a web page): the model cites
/// it as `[n]`. Numbers are the turn's: the same passage keeps its number across calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Source {
    /// Its number in the turn, as cited (`[n]`).
    pub n: u32,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The knowledge base it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kb: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_id: Option<String>,
    /// Retrieval score (higher is closer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Where in the document: its heading path, joined with " › ".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// The passage itself (at most 800 characters), for a hover card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}

impl Source {
    /// Where it is, for people: `lecture.pdf, p. 12 · 3.2 Limits` (title, page, section; a
    /// web source's URL when it has no page).
    pub fn location(&self) -> String {
        let mut out = self.title.clone();
        match (self.page, &self.url) {
            (Some(page), _) => out.push_str(&format!(", p. {page}")),
            (None, Some(url)) if url != &self.title => out.push_str(&format!(", {url}")),
            _ => {}
        }
        if let Some(section) = self.section.as_deref().filter(|s| !s.is_empty()) {
            out.push_str(" · ");
            out.push_str(section);
        }
        out
    }

    /// A line of a "Sources" list under an answer: `[1] lecture.pdf, p. 12 · 3.2 Limits`.
    pub fn list_line(&self) -> String {
        format!("[{}] {}", self.n, self.location())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_source_lists_as_title_page_and_section() {
        let chunk = Source {
            n: 1,
            title: "lecture.pdf".into(),
            page: Some(12),
            section: Some("3.2 Limits".into()),
            ..Source::default()
        };
        assert_eq!(chunk.list_line(), "[1] lecture.pdf, p. 12 · 3.2 Limits");
        let web = Source {
            n: 2,
            title: "Limits".into(),
            url: Some("https://example.org/limits".into()),
            ..Source::default()
        };
        assert_eq!(web.list_line(), "[2] Limits, https://example.org/limits");
        let bare = Source {
            n: 3,
            title: "notes.md".into(),
            ..Source::default()
        };
        assert_eq!(bare.list_line(), "[3] notes.md");
    }

    #[test]
    fn a_source_leaves_out_what_it_does_not_know() {
        let web = Source {
            n: 1,
            title: "Quadratic formula".into(),
            url: Some("https://example.org/q".into()),
            ..Source::default()
        };
        let json = serde_json::to_value(&web).expect("json");
        assert_eq!(
            json,
            json!({"n": 1, "title": "Quadratic formula", "url": "https://example.org/q"})
        );
        let chunk: Source = serde_json::from_value(json!({
            "n": 2, "title": "Notes", "kb": "algebra", "document_id": "d1", "page": 4,
            "chunk_id": "c9", "score": 0.75
        }))
        .expect("decoded");
        assert_eq!(chunk.page, Some(4));
        assert_eq!(chunk.score, Some(0.75));
        assert_eq!(
            serde_json::from_value::<Source>(serde_json::to_value(&chunk).expect("json"))
                .expect("again"),
            chunk
        );
    }
}
