//! deepsolve-images: the images a turn is given, made ready for a model — the one place every
//! front end (the CLI's `--image`, the API, the OpenAI facade; through `deepsolve_app::images`)
//! turns bytes and a name into a [`TurnImage`] or an error naming the file and the problem:
//!
//! - the type comes from the magic bytes only (PNG, JPEG, WebP, GIF), never from the name or
//!   a declared type;
//! - at most [`ImageLimits::max_bytes`] (10 MiB) per image, [`MAX_IMAGES`] per turn;
//! - the size is read from the header and checked before any pixel is decoded, and decoding
//!   is held to a memory limit: a decompression bomb (a few KB claiming gigapixels) is refused
//!   from its header;
//! - an image longer than [`ImageLimits::max_side`] (2 048 px) on its long side is scaled
//!   down and re-encoded (PNG and GIF as PNG, JPEG as JPEG, WebP as JPEG or, with
//!   transparency, PNG — there is no lossy WebP encoder here, and a downscaled photo as
//!   lossless WebP would be megabytes per request); a JPEG's EXIF orientation is applied
//!   first, as the re-encoded file carries none. A smaller image is passed on untouched, once
//!   it has decoded.

use std::io::Cursor;
use std::sync::{Arc, LazyLock};

use deepsolve_core::TurnImage;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

/// Most images one turn may have.
pub const MAX_IMAGES: usize = 8;

/// What an image may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Largest file, in bytes.
    pub max_bytes: u64,
    /// Longest side the model is sent, in pixels; longer images are scaled down.
    pub max_side: u32,
    /// Most pixels (width × height) an image may have to be decoded at all.
    pub max_pixels: u64,
}

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits {
            max_bytes: 10 * 1024 * 1024,
            max_side: 2048,
            // A 48-megapixel phone photo fits; decoded as RGBA it takes under 200 MiB.
            max_pixels: 50_000_000,
        }
    }
}

/// An image type we accept, known by its magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageType {
    Png,
    Jpeg,
    Webp,
    Gif,
}

impl ImageType {
    /// The type the bytes start with, whatever the file is called.
    pub fn sniff(bytes: &[u8]) -> Option<ImageType> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageType::Png)
        } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
            Some(ImageType::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageType::Gif)
        } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
            Some(ImageType::Webp)
        } else {
            None
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            ImageType::Png => "image/png",
            ImageType::Jpeg => "image/jpeg",
            ImageType::Webp => "image/webp",
            ImageType::Gif => "image/gif",
        }
    }

    /// The type's name for people (`PNG`, `JPEG`, `WebP`, `GIF`).
    pub fn label(self) -> &'static str {
        match self {
            ImageType::Png => "PNG",
            ImageType::Jpeg => "JPEG",
            ImageType::Webp => "WebP",
            ImageType::Gif => "GIF",
        }
    }

    fn format(self) -> ImageFormat {
        match self {
            ImageType::Png => ImageFormat::Png,
            ImageType::Jpeg => ImageFormat::Jpeg,
            ImageType::Webp => ImageFormat::WebP,
            ImageType::Gif => ImageFormat::Gif,
        }
    }
}

/// Why an image was refused; the message names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("{name}: the file is empty")]
    Empty { name: String },
    #[error("{name}: {size} is over the {max} limit for an image")]
    TooLarge {
        name: String,
        size: String,
        max: String,
    },
    #[error("{name}: not a PNG, JPEG, WebP or GIF image (read from its bytes, not its name)")]
    NotAnImage { name: String },
    #[error(
        "{name}: {width}×{height} pixels is more than an image may have ({max_megapixels} megapixels)"
    )]
    TooManyPixels {
        name: String,
        width: u32,
        height: u32,
        max_megapixels: u64,
    },
    #[error("{name}: the {kind} image cannot be read: {reason}")]
    Unreadable {
        name: String,
        kind: &'static str,
        reason: String,
    },
    #[error("{count} images: a turn may have at most {max}")]
    TooMany { count: usize, max: usize },
}

/// A size as people read it: `12.5 MiB`, `10 MiB`, `300 KiB`, `12 bytes`.
fn size_text(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KIB * KIB {
        let mib = b / (KIB * KIB);
        if mib.fract() == 0.0 {
            format!("{mib:.0} MiB")
        } else {
            format!("{mib:.1} MiB")
        }
    } else if b >= KIB {
        format!("{:.0} KiB", b / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The size check alone, for readers that check as bytes arrive (`size` so far).
pub fn check_size(name: &str, size: u64, limits: &ImageLimits) -> Result<(), ImageError> {
    if size > limits.max_bytes {
        return Err(ImageError::TooLarge {
            name: name.to_string(),
            size: size_text(size),
            max: size_text(limits.max_bytes),
        });
    }
    Ok(())
}

/// Make one image ready: checked, decoded within limits, scaled down when it is too long;
/// `n` is its position in the turn (its id is `image_<n>`).
pub fn prepare_image(
    name: &str,
    bytes: Vec<u8>,
    n: usize,
    limits: &ImageLimits,
) -> Result<TurnImage, ImageError> {
    let name = name.to_string();
    if bytes.is_empty() {
        return Err(ImageError::Empty { name });
    }
    check_size(&name, bytes.len() as u64, limits)?;
    let Some(kind) = ImageType::sniff(&bytes) else {
        return Err(ImageError::NotAnImage { name });
    };
    let unreadable = |e: image::ImageError| ImageError::Unreadable {
        name: name.clone(),
        kind: kind.label(),
        reason: e.to_string(),
    };
    let mut decoder = ImageReader::with_format(Cursor::new(&bytes), kind.format())
        .into_decoder()
        .map_err(unreadable)?;
    let (width, height) = decoder.dimensions();
    check_pixels(&name, width, height, limits)?;
    let orientation = decoder.orientation().map_err(unreadable)?;
    decoder
        .set_limits(decode_limits(width, height))
        .map_err(unreadable)?;
    let mut pixels = DynamicImage::from_decoder(decoder).map_err(unreadable)?;
    let (mime, bytes, width, height) = if width.max(height) <= limits.max_side {
        (kind.mime(), bytes, width, height)
    } else {
        pixels.apply_orientation(orientation);
        let small = pixels.resize(limits.max_side, limits.max_side, FilterType::Triangle);
        let (mime, encoded) = reencode(kind, &small).map_err(unreadable)?;
        (mime, encoded, small.width(), small.height())
    };
    Ok(TurnImage {
        id: format!("image_{n}"),
        name,
        mime: mime.to_string(),
        width,
        height,
        bytes: Arc::from(bytes),
    })
}

fn check_pixels(
    name: &str,
    width: u32,
    height: u32,
    limits: &ImageLimits,
) -> Result<(), ImageError> {
    if u64::from(width) * u64::from(height) > limits.max_pixels || width == 0 || height == 0 {
        return Err(ImageError::TooManyPixels {
            name: name.to_string(),
            width,
            height,
            max_megapixels: limits.max_pixels / 1_000_000,
        });
    }
    Ok(())
}

/// What the decoder may allocate: the pixels of this (already checked) size at up to 16 bytes
/// each (RGBA of 32-bit floats, the widest layout a decoder may pick), plus room for its own
/// buffers.
fn decode_limits(width: u32, height: u32) -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(width);
    limits.max_image_height = Some(height);
    limits.max_alloc = Some(u64::from(width) * u64::from(height) * 16 + 64 * 1024 * 1024);
    limits
}

/// The scaled-down image in the format its type calls for (see the module's docs).
fn reencode(
    kind: ImageType,
    image: &DynamicImage,
) -> Result<(&'static str, Vec<u8>), image::ImageError> {
    let as_png = match kind {
        ImageType::Png | ImageType::Gif => true,
        ImageType::Jpeg => false,
        ImageType::Webp => image.color().has_alpha(),
    };
    let mut out = Cursor::new(Vec::new());
    if as_png {
        image.write_to(&mut out, ImageFormat::Png)?;
        return Ok((ImageType::Png.mime(), out.into_inner()));
    }
    // JPEG has no alpha; quality 85 keeps text and lines legible at a fraction of PNG's size.
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85);
    image.to_rgb8().write_with_encoder(encoder)?;
    Ok((ImageType::Jpeg.mime(), out.into_inner()))
}

/// One image as given: a name for people and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInput {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Decodes of large images running at once in the process: each may hold a few hundred MiB,
/// so a burst of uploads waits its turn instead of multiplying that.
static DECODES: LazyLock<tokio::sync::Semaphore> = LazyLock::new(|| tokio::sync::Semaphore::new(2));

/// Every image of a turn, in order (ids `image_1`, …), prepared off the async threads; the
/// first refused one is the error.
pub async fn prepare_images(
    inputs: Vec<ImageInput>,
    limits: ImageLimits,
) -> Result<Vec<TurnImage>, ImageError> {
    if inputs.len() > MAX_IMAGES {
        return Err(ImageError::TooMany {
            count: inputs.len(),
            max: MAX_IMAGES,
        });
    }
    let mut images = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.into_iter().enumerate() {
        let _permit = DECODES.acquire().await;
        let prepared = tokio::task::spawn_blocking(move || {
            prepare_image(&input.name, input.bytes, i + 1, &limits)
        })
        .await;
        match prepared {
            Ok(image) => images.push(image?),
            Err(join) => {
                return Err(ImageError::Unreadable {
                    name: format!("image {}", i + 1),
                    kind: "image",
                    reason: format!("its decoder failed ({join})"),
                });
            }
        }
    }
    Ok(images)
}
