//! An image a turn was given (a photographed problem, a figure): checked and downscaled
//! before it reaches the engine, so core only carries it.

use std::fmt;
use std::sync::Arc;

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
