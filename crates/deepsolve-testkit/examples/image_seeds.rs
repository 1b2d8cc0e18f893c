//! Writes the `turn_image` fuzz target's seeds: a small figure in each accepted format and a
//! decompression bomb's header, made by this crate's fixture code (`images`).
//!
//! ```sh
//! cargo run -q -p deepsolve-testkit --example image_seeds -- fuzz/seeds/turn_image
//! ```

use deepsolve_testkit::images::{Triangle, encode, png_bomb};
use image::ImageFormat;

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds/turn_image".into());
    std::fs::create_dir_all(&dir)?;
    let figure = Triangle::right(24, 16).draw();
    for (name, format) in [
        ("triangle.png", ImageFormat::Png),
        ("triangle.jpg", ImageFormat::Jpeg),
        ("triangle.gif", ImageFormat::Gif),
        ("triangle.webp", ImageFormat::WebP),
    ] {
        std::fs::write(format!("{dir}/{name}"), encode(&figure, format))?;
    }
    std::fs::write(format!("{dir}/bomb.png"), png_bomb(40_000, 40_000))?;
    Ok(())
}
