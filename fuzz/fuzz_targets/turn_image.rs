//! `prepare_image` on arbitrary bytes (an image a client uploads): never panics, never decodes
//! past its pixel cap, and whatever it accepts is a PNG, JPEG, WebP or GIF that is what it says
//! (by its own bytes), within the long-side limit, of the size it reports.
#![no_main]

use deepsolve_images::{ImageLimits, ImageType, prepare_image};
use libfuzzer_sys::fuzz_target;

/// Small limits: scaling is exercised on small inputs, and a claimed size past the pixel cap is
/// refused before any memory is spent on it.
const LIMITS: ImageLimits = ImageLimits {
    max_bytes: 1024 * 1024,
    max_side: 32,
    max_pixels: 1_000_000,
};

fuzz_target!(|data: &[u8]| {
    let Ok(image) = prepare_image("fuzz.png", data.to_vec(), 1, &LIMITS) else {
        return;
    };
    let kind = ImageType::sniff(&image.bytes).expect("accepted bytes are an image");
    assert_eq!(image.mime, kind.mime());
    assert!(image.width >= 1 && image.height >= 1);
    if image.bytes[..] != data[..] {
        // Scaled down: within the side, and the size it reports is the one it has.
        assert!(image.width.max(image.height) <= LIMITS.max_side);
        let again = prepare_image("again", image.bytes.to_vec(), 1, &LIMITS).expect("re-reads");
        assert_eq!((again.width, again.height), (image.width, image.height));
    } else {
        assert!(u64::from(image.width) * u64::from(image.height) <= LIMITS.max_pixels);
    }
});
