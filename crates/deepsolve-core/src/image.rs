//! An image a turn was given (a photographed problem, a figure): checked and downscaled
//! before it reaches the engine, so core only carries it.

use std::fmt;
use std::sync::Arc;

use crate::material::clean;
use crate::texts::{Text, Texts};

/// One image of a turn, ready for a model: a raster type verified by its magic bytes,
/// at most 2 048 px on its long side. Cheap to clone (the bytes are shared).
#[derive(Clone, PartialEq, Eq)]
pub struct TurnImage {
    /// Stable within the turn (`image_1`, …): how the prompt and tools refer to it.
    pub id: String,
    /// The file name it came with, for people (never a path).
    pub name: String,
    /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
    pub mime: String,
    pub width: u32,
    pub height: u32,
    pub bytes: Arc<[u8]>,
}

impl fmt::Debug for TurnImage {
    // The bytes would flood any log or test failure; their length says enough.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnImage")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("mime", &self.mime)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// The images section of the system prompt, starting with a blank line (it follows the
/// playbook and the material); `None` for a turn without images. A model that sees them is
/// told they come with the problem; one that does not is told not to guess what they show,
/// and which of its tools (`readers`) can read them. Part of the byte-stable system message.
pub(crate) fn manifest(
    images: &[TurnImage],
    sees: bool,
    readers: &[&str],
    texts: &Texts,
) -> Option<String> {
    if images.is_empty() {
        return None;
    }
    let header = if sees {
        texts.get(Text::ImagesSeen).to_string()
    } else if readers.is_empty() {
        texts.get(Text::ImagesUnseenNoReader).to_string()
    } else {
        let tools: Vec<String> = readers.iter().map(|r| format!("`{r}`")).collect();
        texts.render(Text::ImagesUnseen, &[("tools", &tools.join(", "))])
    };
    let mut out = format!("\n{header}\n");
    for image in images {
        out.push('\n');
        out.push_str(&texts.render(
            Text::ImageLine,
            &[
                ("id", &clean(&image.id)),
                ("name", &clean(&image.name)),
                ("width", &image.width),
                ("height", &image.height),
            ],
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::Language;

    fn image(id: &str, name: &str) -> TurnImage {
        TurnImage {
            id: id.into(),
            name: name.into(),
            mime: "image/png".into(),
            width: 640,
            height: 480,
            bytes: Arc::from(&b"\x89PNG"[..]),
        }
    }

    #[test]
    fn no_images_no_section() {
        let texts = Texts::builtin(Language::En);
        assert_eq!(manifest(&[], true, &[], &texts), None);
    }

    #[test]
    fn each_image_is_listed_with_its_size_and_a_clean_name() {
        let texts = Texts::builtin(Language::En);
        let images = [
            image("image_1", "tri`angle\n.png"),
            image("image_2", "b.jpg"),
        ];
        let seen = manifest(&images, true, &[], &texts).expect("a section");
        assert!(seen.starts_with("\n# Images"), "{seen}");
        assert!(
            seen.contains("`image_1`: tri angle .png (640×480)"),
            "{seen}"
        );
        assert!(seen.contains("`image_2`: b.jpg"), "{seen}");
        let unseen = manifest(&images, false, &["figure_reader"], &texts).expect("a section");
        assert!(unseen.contains("cannot see") && unseen.contains("`figure_reader`"));
        let alone = manifest(&images, false, &[], &texts).expect("a section");
        assert!(alone.contains("cannot see") && !alone.contains("figure_reader"));
    }

    #[test]
    fn the_chinese_section_has_no_english_text() {
        let texts = Texts::builtin(Language::Zh);
        let images = [image("image_1", "图.png")];
        for text in [
            manifest(&images, true, &[], &texts),
            manifest(&images, false, &["t"], &texts),
            manifest(&images, false, &[], &texts),
        ] {
            let text = text.expect("a section");
            assert!(
                !text.contains("image(s)") && !text.contains("Images"),
                "{text}"
            );
        }
    }
}
