//! Message content parts: text and images, for problems that come with a figure.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One part of a message's content, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    /// An image, inline (`data`, base64) or by `url`; exactly one of the two is set.
    Image {
        /// e.g. `image/png`.
        mime: String,
        /// The image bytes, base64 (standard alphabet, padded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_are_tagged_by_type() {
        let parts = vec![
            ContentPart::Text {
                text: "Find the area".into(),
            },
            ContentPart::Image {
                mime: "image/png".into(),
                data: Some("iVBORw0KGgo=".into()),
                url: None,
            },
        ];
        let json = serde_json::to_value(&parts).expect("json");
        assert_eq!(
            json,
            json!([
                {"type": "text", "text": "Find the area"},
                {"type": "image", "mime": "image/png", "data": "iVBORw0KGgo="}
            ])
        );
        let back: Vec<ContentPart> = serde_json::from_value(json).expect("decoded");
        assert_eq!(back, parts);
    }
}
