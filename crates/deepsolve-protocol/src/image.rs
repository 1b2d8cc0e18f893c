//! The images of a turn (a photographed problem, a figure), as the store keeps them and
//! clients see them. The bytes themselves are in the store's image rows, served from
//! `GET /api/v1/turns/{turn}/images/{image}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One image of a turn, as its stored spec lists it: what a resumed turn sends again (its
/// bytes are read back by `id`). The image is the one the model was sent: verified by its
/// magic bytes and at most 2 048 px on its long side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StoredImage {
    /// `image_1`, `image_2`, … in the order given.
    pub id: String,
    /// The file name it came with (never a path).
    pub name: String,
    /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
    pub mime: String,
    pub width: u32,
    pub height: u32,
    /// Bytes.
    pub size: u64,
}

/// An image of a turn as clients see it (`TurnView::images`): shown from `url`, a raster image
/// served with its verified type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnImageView {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub width: u32,
    pub height: u32,
    pub size: u64,
    pub url: String,
}
