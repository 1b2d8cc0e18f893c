//! What a turn may read: the knowledge bases it searches and the documents in them, with the
//! turn's own attachments. Kept with the stored turn so a resume sees the same material; the
//! system prompt lists it (where to look, never contents).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The knowledge bases and documents a turn may read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Material {
    pub knowledge_bases: Vec<MaterialKb>,
    /// The documents of those knowledge bases (each names its `kb`).
    pub documents: Vec<MaterialDocument>,
}

/// A knowledge base a turn may search.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MaterialKb {
    pub id: String,
    pub name: String,
    /// How many documents it holds (more than `Material::documents` may list).
    pub documents: u32,
    /// True for the turn's own attachments (a hidden knowledge base of the turn).
    #[serde(default)]
    pub attachments: bool,
}

/// A document a turn may read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MaterialDocument {
    pub id: String,
    pub name: String,
    /// The format (`pdf`, `docx`, `html`, `markdown`, `text`).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<u32>,
    /// In bytes.
    pub size: u64,
    /// The id of its knowledge base.
    pub kb: String,
    /// True when it was attached to the turn itself.
    #[serde(default)]
    pub attached: bool,
}

impl Material {
    pub fn is_empty(&self) -> bool {
        self.knowledge_bases.is_empty() && self.documents.is_empty()
    }

    /// The documents of the knowledge base `kb_id`, in listed order.
    pub fn documents_of<'a>(
        &'a self,
        kb_id: &'a str,
    ) -> impl Iterator<Item = &'a MaterialDocument> + 'a {
        self.documents.iter().filter(move |d| d.kb == kb_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn material_round_trips_and_defaults_its_flags() {
        let material: Material = serde_json::from_value(json!({
            "knowledge_bases": [{"id": "kb_1", "name": "notes", "documents": 1}],
            "documents": [{"id": "doc_1", "name": "lecture.pdf", "kind": "pdf", "pages": 12,
                           "size": 2048, "kb": "kb_1"}]
        }))
        .expect("decoded");
        assert!(!material.knowledge_bases[0].attachments);
        assert!(!material.documents[0].attached);
        assert_eq!(material.documents_of("kb_1").count(), 1);
        assert_eq!(material.documents_of("kb_2").count(), 0);
        let again: Material =
            serde_json::from_value(serde_json::to_value(&material).expect("json")).expect("again");
        assert_eq!(again, material);
    }
}
