//! Knowledge bases over HTTP (`/api/v1/knowledge-bases…`): a user's collections of documents,
//! their ingest state, and search over them. `{kb}` in a path is a knowledge base's id or name.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A knowledge base with counts of its documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KbView {
    pub id: String,
    pub name: String,
    /// Every document, whatever its status.
    pub documents: u32,
    /// Documents that are searched (ingested).
    pub ready: u32,
    /// Documents whose ingest failed (their `error` says why).
    pub failed: u32,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub updated_at: i64,
    /// The model its passages were embedded with; absent: full-text search only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
}

/// `GET /api/v1/knowledge-bases`: by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KbList {
    pub knowledge_bases: Vec<KbView>,
}

/// `POST /api/v1/knowledge-bases`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKb {
    /// 1–120 characters, no control characters; unique among the caller's knowledge bases.
    pub name: String,
}

/// `GET /api/v1/knowledge-bases/{kb}`: the knowledge base and its documents, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KbDetail {
    pub kb: KbView,
    pub documents: Vec<DocumentView>,
}

/// Where a document's ingest stands; only `ready` documents are searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DocumentStatus {
    Queued,
    Ingesting,
    Ready,
    Failed,
}

/// An uploaded document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DocumentView {
    pub id: String,
    pub kb_id: String,
    /// The file's base name, as uploaded.
    pub name: String,
    /// `pdf`, `docx`, `html`, `markdown` or `text`.
    pub kind: String,
    /// Bytes.
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<u32>,
    pub status: DocumentStatus,
    /// Why the ingest failed, naming the document and the problem (with `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Ingest progress: pages extracted so far, of `pages_total` when known.
    pub pages_done: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_total: Option<u32>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
}

/// `POST /api/v1/knowledge-bases/{kb}/documents` (202): the uploaded documents, queued; their
/// ingest runs in the background (poll each document for its status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DocumentsAccepted {
    pub documents: Vec<DocumentView>,
}

/// `POST /api/v1/knowledge-bases/{kb}/search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchKb {
    pub query: String,
    /// How many passages (1–20; 5 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
}

/// One passage that matched, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchHit {
    pub document_id: String,
    /// The document's name.
    pub title: String,
    /// The page the passage starts on, when the format has pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// The headings it sits under, joined with " › ".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    pub chunk_id: String,
    /// Higher is closer (fused ranks: comparable within one search only).
    pub score: f64,
    pub text: String,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
}

/// A file given with a turn (`attachments` of `POST /api/v1/turns`): ingested before the turn
/// starts, readable by that turn only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnAttachment {
    /// The file's name (its base name is kept; the kind is told by it and the bytes).
    pub name: String,
    /// The file's bytes, base64 (standard alphabet, padded).
    pub data_base64: String,
}

/// Knowledge bases on this server (`knowledge` of `GET /api/v1/capabilities`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KnowledgeView {
    /// Knowledge bases and attachments can be used.
    pub available: bool,
    /// The model passages are embedded with; absent: full-text search only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
    /// The largest file accepted, in MiB.
    pub max_upload_mb: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_document_leaves_out_what_it_does_not_know() {
        let doc = DocumentView {
            id: "kbd_1".into(),
            kb_id: "kb_1".into(),
            name: "notes.md".into(),
            kind: "markdown".into(),
            size: 12,
            pages: None,
            status: DocumentStatus::Queued,
            error: None,
            pages_done: 0,
            pages_total: None,
            created_at: 1,
        };
        assert_eq!(
            serde_json::to_value(&doc).expect("json"),
            json!({"id": "kbd_1", "kb_id": "kb_1", "name": "notes.md", "kind": "markdown",
                   "size": 12, "status": "queued", "pages_done": 0, "created_at": 1})
        );
    }

    #[test]
    fn requests_refuse_unknown_fields() {
        assert!(serde_json::from_value::<CreateKb>(json!({"name": "n", "nmae": "m"})).is_err());
        assert!(serde_json::from_value::<SearchKb>(json!({"query": "q", "topk": 3})).is_err());
        assert!(
            serde_json::from_value::<TurnAttachment>(json!({"name": "a", "data": "eA=="})).is_err()
        );
    }
}
