//! The plots rasterised: our SVG through resvg (pure Rust), at twice the size for sharp text.
//! Text uses the system's fonts (DejaVu, Noto CJK where installed); without fonts the labels
//! are missing from the PNG, never from the SVG.

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{Options, Tree};

const SCALE: f32 = 2.0;

pub(super) struct Renderer {
    options: Options<'static>,
}

impl Renderer {
    /// Loads the system fonts once for every plot of a report.
    pub(super) fn new() -> Self {
        let mut options = Options::default();
        options.fontdb_mut().load_system_fonts();
        Renderer { options }
    }

    pub(super) fn render(&self, svg: &str) -> Result<Vec<u8>, String> {
        let tree = Tree::from_str(svg, &self.options).map_err(|e| e.to_string())?;
        let size = tree.size();
        let width = (size.width() * SCALE).ceil() as u32;
        let height = (size.height() * SCALE).ceil() as u32;
        let mut pixmap =
            Pixmap::new(width, height).ok_or_else(|| format!("no {width}x{height} canvas"))?;
        resvg::render(
            &tree,
            Transform::from_scale(SCALE, SCALE),
            &mut pixmap.as_mut(),
        );
        pixmap.encode_png().map_err(|e| e.to_string())
    }
}
