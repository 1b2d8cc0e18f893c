//! The integration tests of deepsolve-images, as one test binary: images checked by their
//! bytes, refused with the file's name and the problem, scaled down for the model with their
//! content intact.

// Test code: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use deepsolve_core::TurnImage;
use deepsolve_images::{ImageError, ImageInput, ImageLimits, prepare_image, prepare_images};
use deepsolve_testkit::images::{Triangle, encode, png_bomb, see, solid_png};
use image::{ImageFormat, RgbImage, RgbaImage};

fn prepare(name: &str, bytes: Vec<u8>) -> Result<TurnImage, ImageError> {
    prepare_image(name, bytes, 1, &ImageLimits::default())
}

/// A figure longer than the model's 2 048 px, cheap to encode in a debug build.
fn wide() -> RgbImage {
    Triangle::right(2100, 240).draw()
}

#[test]
fn a_small_image_passes_untouched_whatever_its_name() {
    for (format, mime) in [
        (ImageFormat::Png, "image/png"),
        (ImageFormat::Jpeg, "image/jpeg"),
        (ImageFormat::WebP, "image/webp"),
        (ImageFormat::Gif, "image/gif"),
    ] {
        let bytes = encode(&Triangle::right(300, 200).draw(), format);
        let image = prepare("photo.txt", bytes.clone()).expect("an image");
        assert_eq!(image.mime, mime);
        assert_eq!((image.width, image.height), (300, 200));
        assert_eq!(&image.bytes[..], &bytes[..], "{mime}: untouched");
        assert_eq!(
            (image.id.as_str(), image.name.as_str()),
            ("image_1", "photo.txt")
        );
    }
}

#[test]
fn a_long_image_is_scaled_to_2048_and_keeps_its_kind_and_content() {
    for (format, mime) in [
        (ImageFormat::Png, "image/png"),
        (ImageFormat::Jpeg, "image/jpeg"),
        (ImageFormat::Gif, "image/png"),
        (ImageFormat::WebP, "image/jpeg"),
    ] {
        let image = prepare("figure", encode(&wide(), format)).expect("an image");
        assert_eq!(image.mime, mime, "{format:?}");
        assert_eq!((image.width, image.height), (2048, 234), "{format:?}");
        let seen = see(&image.bytes).expect("it decodes");
        assert_eq!((seen.width, seen.height), (2048, 234));
        let angle = seen.angle_c().expect("the vertices survive the scaling");
        let drawn = Triangle::right(2100, 240).angle_c();
        assert!(
            (angle - drawn).abs() < 1.5,
            "{format:?}: {angle} vs {drawn}"
        );
    }
    // Transparency keeps a WebP a lossless PNG.
    let clear = RgbaImage::from_pixel(2100, 10, image::Rgba([0, 0, 0, 0]));
    let mut webp = std::io::Cursor::new(Vec::new());
    clear.write_to(&mut webp, ImageFormat::WebP).expect("webp");
    let image = prepare("clear.webp", webp.into_inner()).expect("an image");
    assert_eq!((image.mime.as_str(), image.width), ("image/png", 2048));
}

#[test]
fn bad_files_are_refused_with_their_name_and_the_problem() {
    let err = |name: &str, bytes: Vec<u8>| prepare(name, bytes).expect_err(name).to_string();
    let text = err("triangle.png", b"Find angle C of the triangle.\n".to_vec());
    assert_eq!(
        text,
        "triangle.png: not a PNG, JPEG, WebP or GIF image (read from its bytes, not its name)"
    );
    assert_eq!(err("empty.png", Vec::new()), "empty.png: the file is empty");
    let limits = ImageLimits {
        max_bytes: 1024,
        ..ImageLimits::default()
    };
    let big = prepare_image("big.png", vec![0x89; 3 * 1024 * 1024], 1, &limits)
        .expect_err("over the cap");
    assert!(matches!(big, ImageError::TooLarge { .. }));
    assert_eq!(
        big.to_string(),
        "big.png: 3 MiB is over the 1 KiB limit for an image"
    );
    // A header of 60 000 × 60 000 pixels over a few hundred bytes: refused from the header.
    let bomb = err("bomb.png", png_bomb(60_000, 60_000));
    assert_eq!(
        bomb,
        "bomb.png: 60000×60000 pixels is more than an image may have (50 megapixels)"
    );
    // A real PNG cut short: its header reads, its pixels do not.
    let mut cut = solid_png(64, 64, [1, 2, 3]);
    cut.truncate(cut.len() / 2);
    let cut = err("cut.png", cut);
    assert!(
        cut.starts_with("cut.png: the PNG image cannot be read: "),
        "{cut}"
    );
}

#[tokio::test]
async fn a_turn_has_at_most_eight_images_numbered_in_order() {
    let input = |i: usize| ImageInput {
        name: format!("{i}.png"),
        bytes: solid_png(4, 4, [0, 0, 0]),
    };
    let images = prepare_images((1..=3).map(input).collect(), ImageLimits::default())
        .await
        .expect("three images");
    let ids: Vec<&str> = images.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["image_1", "image_2", "image_3"]);
    let nine = prepare_images((1..=9).map(input).collect(), ImageLimits::default()).await;
    assert_eq!(
        nine.expect_err("too many").to_string(),
        "9 images: a turn may have at most 8"
    );
}
