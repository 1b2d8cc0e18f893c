//! A subset of GeoGebra's command language, for figures a model describes: a parser whose
//! errors name the line, the column and the command (and the nearest command for a misspelt
//! one), an evaluator that computes every object from its parents (intersections, circles
//! through three points, angles in degrees) and names degenerate constructions, and an SVG
//! renderer whose output is safe to show in a page. Pure: no I/O.
//!
//! ```
//! let checked = deepsolve_geometry::check("A = (0, 0)\nB = (4, 0)\nC = (0, 3)\nt = Polygon(A, B, C)\nα = Angle(C, B, A)");
//! assert!(checked.errors.is_empty());
//! let angle = checked.construction.number("α").unwrap();
//! assert!((angle - 36.8699).abs() < 1e-4);
//! let svg = deepsolve_geometry::render_svg(&checked.construction, &Default::default());
//! assert!(svg.starts_with("<svg"));
//! ```
//!
//! The subset: `A = (x, y)` and bare `(x, y)` points; `Point`, `Segment`, `Line`, `Ray`,
//! `Vector`, `Circle` (centre and radius, centre and point, three points), `Polygon`,
//! `Midpoint`, `Intersect` (lines, segments, rays and circles, with an optional index),
//! `PerpendicularLine`, `ParallelLine`, `AngleBisector`, `Angle` (three points or two lines;
//! the smaller angle, 0–180°), `Distance`, `Length`, `Text`; `SetCaption`, `ShowLabel`,
//! `SetColor`; numbers and arithmetic on numbers, points and vectors; functions `f(x) = …`
//! (drawn as graphs) with `+ - * / ^`, `sqrt`, `sin`, `cos`, `tan`, `asin`, `acos`, `atan`,
//! `abs`, `exp`, `ln`, `pi`, `e` and `30°`. See [`names::COMMANDS`] for what each accepts.

mod ast;
mod error;
mod eval;
pub mod geom;
mod lexer;
pub mod limits;
pub mod names;
mod parse;
pub mod svg;
mod table;
mod value;
mod zh;

pub use ast::{BinaryOp, Command, Expr, ExprKind, Span, Statement, UnaryOp};
pub use error::{ErrorKind, GeoError, Lang};
pub use eval::evaluate;
pub use geom::Pt;
pub use parse::{Parsed, parse_command, parse_script};
pub use svg::{Axes, RenderOptions, escape, render_svg};
pub use table::{describe, format_number, format_point, object_table};
pub use value::{Color, Construction, Function, Object, PALETTE, Style, Value};

/// A script read and evaluated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checked {
    /// The commands that parsed.
    pub commands: Vec<Command>,
    /// Every object that could be built.
    pub construction: Construction,
    /// Every error, reading and evaluation, by line.
    pub errors: Vec<GeoError>,
}

impl Checked {
    /// The lines (1-based) that have an error.
    pub fn failed_lines(&self) -> Vec<usize> {
        let mut lines: Vec<usize> = self.errors.iter().map(|e| e.line).collect();
        lines.dedup();
        lines
    }

    /// The commands that were built, as written (one per line), in order.
    pub fn valid_commands(&self) -> Vec<&Command> {
        let failed = self.failed_lines();
        self.commands
            .iter()
            .filter(|c| !failed.contains(&c.line))
            .collect()
    }
}

/// Reads and evaluates `script`: every line that does not parse or cannot be built is an
/// error; the rest make the construction.
pub fn check(script: &str) -> Checked {
    let parsed = parse_script(script);
    let construction = evaluate(&parsed.commands);
    let mut errors = parsed.errors;
    errors.extend(construction.errors.iter().cloned());
    errors.sort_by_key(|e| e.line);
    Checked {
        commands: parsed.commands,
        construction,
        errors,
    }
}
