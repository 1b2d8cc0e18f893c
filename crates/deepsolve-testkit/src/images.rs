//! Fixture images made in code (nothing binary is committed), and the eyes of the scripted
//! vision model: what it "sees" in an image is read from its pixels.
//!
//! - [`solid_png`]: one colour (the vision probe asks which).
//! - [`Triangle`]: a triangle drawn in black with its vertices marked by coloured discs —
//!   A red, B green, C blue — so a policy can find the vertices and measure angle C, and a
//!   test knows the answer from the coordinates it drew.
//! - [`png_bomb`]: a PNG whose header claims a huge size over a few bytes of data (a
//!   decompression bomb: it must be refused from its header, before any pixel is decoded).
//! - [`see`]: what the scripted vision model reads from image bytes.

use std::io::{Cursor, Write};

use image::{ImageFormat, ImageReader, Rgb, RgbImage};

/// The three vertex colours, in vertex order A, B, C.
pub const VERTEX_COLOURS: [[u8; 3]; 3] = [[220, 30, 30], [30, 180, 30], [30, 30, 220]];

/// A `width`×`height` PNG of one colour.
pub fn solid_png(width: u32, height: u32, rgb: [u8; 3]) -> Vec<u8> {
    encode(
        &RgbImage::from_pixel(width, height, Rgb(rgb)),
        ImageFormat::Png,
    )
}

/// `image` in `format` (PNG, JPEG, WebP lossless or GIF).
pub fn encode(image: &RgbImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    let written = match format {
        // GIF has no RGB encoder: it takes RGBA frames.
        ImageFormat::Gif => image::DynamicImage::ImageRgb8(image.clone())
            .to_rgba8()
            .write_to(&mut out, format),
        _ => image.write_to(&mut out, format),
    };
    written.unwrap_or_else(|e| panic!("encoding a fixture image as {format:?}: {e}"));
    out.into_inner()
}

/// The width and height in the header of a PNG, JPEG, WebP or GIF; `None` for anything else.
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .ok()?
        .into_dimensions()
        .ok()
}

/// A triangle figure: vertices in pixel coordinates on a white canvas.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Triangle {
    pub width: u32,
    pub height: u32,
    pub a: (u32, u32),
    pub b: (u32, u32),
    pub c: (u32, u32),
}

impl Triangle {
    /// A 3-4-5 right triangle's shape scaled into `width`×`height`, right angle at B: angle C
    /// is atan(4/3) ≈ 53.1°.
    pub fn right(width: u32, height: u32) -> Self {
        let (w, h) = (f64::from(width), f64::from(height));
        let point = |x: f64, y: f64| ((x * w) as u32, (y * h) as u32);
        // B at the bottom left, A above it, C to its right: AB : BC = 4 : 3 in pixels.
        let unit = (0.8 * w / 3.0).min(0.8 * h / 4.0);
        let b = (0.1 * w, 0.9 * h);
        Triangle {
            width,
            height,
            a: point(b.0 / w, (b.1 - 4.0 * unit) / h),
            b: point(b.0 / w, b.1 / h),
            c: point((b.0 + 3.0 * unit) / w, b.1 / h),
        }
    }

    /// The angle at C in degrees, from the drawn coordinates.
    pub fn angle_c(&self) -> f64 {
        let f = |p: (u32, u32)| (f64::from(p.0), f64::from(p.1));
        angle_at(f(self.c), f(self.a), f(self.b))
    }

    /// The figure as pixels.
    pub fn draw(&self) -> RgbImage {
        let mut img = RgbImage::from_pixel(self.width, self.height, Rgb([255, 255, 255]));
        let thickness = (self.width.min(self.height) / 200).max(1);
        for (p, q) in [(self.a, self.b), (self.b, self.c), (self.c, self.a)] {
            line(&mut img, p, q, thickness, Rgb([0, 0, 0]));
        }
        let radius = (self.width.min(self.height) / 60).max(4);
        for (vertex, colour) in [self.a, self.b, self.c].into_iter().zip(VERTEX_COLOURS) {
            disc(&mut img, vertex, radius, Rgb(colour));
        }
        img
    }

    pub fn png(&self) -> Vec<u8> {
        encode(&self.draw(), ImageFormat::Png)
    }

    pub fn jpeg(&self) -> Vec<u8> {
        encode(&self.draw(), ImageFormat::Jpeg)
    }
}

/// The angle at `vertex` between the rays to `p` and `q`, in degrees.
pub fn angle_at(vertex: (f64, f64), p: (f64, f64), q: (f64, f64)) -> f64 {
    let (u, v) = (
        (p.0 - vertex.0, p.1 - vertex.1),
        (q.0 - vertex.0, q.1 - vertex.1),
    );
    let cos = (u.0 * v.0 + u.1 * v.1) / (u.0.hypot(u.1) * v.0.hypot(v.1));
    cos.clamp(-1.0, 1.0).acos().to_degrees()
}

fn line(img: &mut RgbImage, p: (u32, u32), q: (u32, u32), thickness: u32, colour: Rgb<u8>) {
    let (dx, dy) = (
        f64::from(q.0) - f64::from(p.0),
        f64::from(q.1) - f64::from(p.1),
    );
    let steps = dx.abs().max(dy.abs()).ceil().max(1.0) as u32;
    for i in 0..=steps {
        let t = f64::from(i) / f64::from(steps);
        let x = f64::from(p.0) + t * dx;
        let y = f64::from(p.1) + t * dy;
        disc(img, (x as u32, y as u32), thickness, colour);
    }
}

fn disc(img: &mut RgbImage, centre: (u32, u32), radius: u32, colour: Rgb<u8>) {
    let r = i64::from(radius);
    let (cx, cy) = (i64::from(centre.0), i64::from(centre.1));
    for y in (cy - r).max(0)..=(cy + r).min(i64::from(img.height()) - 1) {
        for x in (cx - r).max(0)..=(cx + r).min(i64::from(img.width()) - 1) {
            if (x - cx).pow(2) + (y - cy).pow(2) <= r * r {
                img.put_pixel(x as u32, y as u32, colour);
            }
        }
    }
}

/// A PNG that claims `width`×`height` RGB pixels but holds one row of them: decoding it
/// naively would allocate `width × height × 3` bytes.
pub fn png_bomb(width: u32, height: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    // 8-bit RGB, deflate, no filter method, no interlace.
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    let row = vec![0u8; 1 + 3 * width.min(1 << 16) as usize];
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let compressed = zlib
        .write_all(&row)
        .and_then(|()| zlib.finish())
        .unwrap_or_else(|e| panic!("compressing the bomb's row: {e}"));
    chunk(&mut out, b"IDAT", &compressed);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}

/// What the scripted vision model reads from an image.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub width: u32,
    pub height: u32,
    /// The name of the colour nearest the image's average (`red`, `green`, …).
    pub colour: &'static str,
    /// The centres of the red, green and blue vertex marks (A, B, C), when all three are
    /// there.
    pub vertices: Option<[(f64, f64); 3]>,
}

impl Seen {
    /// The angle at C, when the vertices were found.
    pub fn angle_c(&self) -> Option<f64> {
        self.vertices.map(|[a, b, c]| angle_at(c, a, b))
    }

    /// One line for people: the size, the colour, and the vertices when there are some.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "a {}×{} image, mostly {}",
            self.width, self.height, self.colour
        );
        if let Some([a, b, c]) = self.vertices {
            let p = |(x, y): (f64, f64)| format!("({x:.0}, {y:.0})");
            text.push_str(&format!(
                "; a triangle with A at {}, B at {}, C at {}",
                p(a),
                p(b),
                p(c)
            ));
        }
        text
    }
}

/// Decode `bytes` and look at them; `None` when they are not an image the testkit reads.
pub fn see(bytes: &[u8]) -> Option<Seen> {
    let img = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .ok()?
        .decode()
        .ok()?
        .to_rgb8();
    let mut sums = [[0f64; 3]; 3];
    let mut counts = [0u64; 3];
    let mut total = [0f64; 3];
    for (x, y, Rgb(px)) in img.enumerate_pixels() {
        for (k, channel) in total.iter_mut().enumerate() {
            *channel += f64::from(px[k]);
        }
        if let Some(k) = vertex_mark(*px) {
            sums[k][0] += f64::from(x);
            sums[k][1] += f64::from(y);
            counts[k] += 1;
        }
    }
    let pixels = f64::from(img.width()) * f64::from(img.height());
    let average = total.map(|t| t / pixels.max(1.0));
    let found = counts.iter().all(|&n| n > 0);
    let vertices = found.then(|| {
        let centre = |k: usize| (sums[k][0] / counts[k] as f64, sums[k][1] / counts[k] as f64);
        [centre(0), centre(1), centre(2)]
    });
    Some(Seen {
        width: img.width(),
        height: img.height(),
        colour: colour_name(average),
        vertices,
    })
}

/// Which vertex colour a pixel is clearly of (one channel high, the others low).
fn vertex_mark(px: [u8; 3]) -> Option<usize> {
    let [r, g, b] = px.map(u16::from);
    match () {
        _ if r > 170 && g < 90 && b < 90 => Some(0),
        _ if g > 130 && r < 90 && b < 90 => Some(1),
        _ if b > 170 && r < 90 && g < 90 => Some(2),
        _ => None,
    }
}

fn colour_name(rgb: [f64; 3]) -> &'static str {
    const NAMES: [(&str, [f64; 3]); 8] = [
        ("black", [0.0, 0.0, 0.0]),
        ("white", [255.0, 255.0, 255.0]),
        ("red", [220.0, 30.0, 30.0]),
        ("green", [30.0, 180.0, 30.0]),
        ("blue", [30.0, 30.0, 220.0]),
        ("yellow", [230.0, 220.0, 30.0]),
        ("grey", [128.0, 128.0, 128.0]),
        ("purple", [128.0, 30.0, 160.0]),
    ];
    let distance = |c: &[f64; 3]| (0..3).map(|k| (c[k] - rgb[k]).powi(2)).sum::<f64>();
    NAMES
        .iter()
        .min_by(|x, y| distance(&x.1).total_cmp(&distance(&y.1)))
        .map_or("grey", |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drawn_triangle_is_seen_where_it_was_drawn_in_every_format() {
        let triangle = Triangle::right(400, 300);
        assert!(
            (triangle.angle_c() - 53.13).abs() < 0.5,
            "{}",
            triangle.angle_c()
        );
        for bytes in [
            triangle.png(),
            triangle.jpeg(),
            encode(&triangle.draw(), ImageFormat::Gif),
        ] {
            let seen = see(&bytes).expect("an image");
            assert_eq!((seen.width, seen.height), (400, 300));
            assert_eq!(seen.colour, "white");
            let angle = seen.angle_c().expect("three vertices");
            assert!((angle - triangle.angle_c()).abs() < 1.0, "{angle}");
        }
    }

    #[test]
    fn a_solid_image_is_seen_as_its_colour() {
        let seen = see(&solid_png(16, 8, [30, 180, 30])).expect("an image");
        assert_eq!((seen.colour, seen.width, seen.height), ("green", 16, 8));
        assert_eq!(
            seen.vertices, None,
            "one colour everywhere is not three marks"
        );
        assert_eq!(see(b"not an image"), None);
    }

    #[test]
    fn the_bomb_claims_its_size_in_a_few_bytes() {
        let bomb = png_bomb(60_000, 60_000);
        assert!(bomb.len() < 4096, "{}", bomb.len());
        assert_eq!(dimensions(&bomb), Some((60_000, 60_000)));
    }
}
