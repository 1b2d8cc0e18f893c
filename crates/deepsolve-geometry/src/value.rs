//! What objects are once evaluated: their values, their style, and the functions drawn as
//! graphs.

use std::fmt;
use std::sync::Arc;

use crate::error::ErrorKind;
use crate::geom::{Extent, Linear, Pt};
use crate::limits::MAX_COORD;

/// An object's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Bool(bool),
    /// A text; placed at `at` when it is drawn.
    Text {
        text: String,
        at: Option<Pt>,
    },
    Point(Pt),
    /// A displacement `d`, drawn from `start`.
    Vector {
        start: Pt,
        d: Pt,
    },
    Segment(Pt, Pt),
    /// Through `p` with direction `d` (never zero).
    Line {
        p: Pt,
        d: Pt,
    },
    /// From `p` in direction `d` (never zero).
    Ray {
        p: Pt,
        d: Pt,
    },
    Circle {
        centre: Pt,
        radius: f64,
    },
    Polygon(Vec<Pt>),
    /// At `vertex`, from the arm in direction `from` (radians) turning by `sweep` (radians,
    /// counter-clockwise positive); `degrees` is its size, 0–180.
    Angle {
        vertex: Pt,
        from: f64,
        sweep: f64,
        degrees: f64,
    },
    Function(Arc<Function>),
}

impl Value {
    /// Its type, as errors and the table name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Text { .. } => "text",
            Value::Point(_) => "point",
            Value::Vector { .. } => "vector",
            Value::Segment(..) => "segment",
            Value::Line { .. } => "line",
            Value::Ray { .. } => "ray",
            Value::Circle { .. } => "circle",
            Value::Polygon(_) => "polygon",
            Value::Angle { .. } => "angle",
            Value::Function(_) => "function",
        }
    }

    /// `kind` with its article, for "cannot add a number and a point".
    pub fn kind_with_article(&self) -> &'static str {
        match self {
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            Value::Text { .. } => "a text",
            Value::Point(_) => "a point",
            Value::Vector { .. } => "a vector",
            Value::Segment(..) => "a segment",
            Value::Line { .. } => "a line",
            Value::Ray { .. } => "a ray",
            Value::Circle { .. } => "a circle",
            Value::Polygon(_) => "a polygon",
            Value::Angle { .. } => "an angle",
            Value::Function(_) => "a function",
        }
    }

    /// A number, or an angle as radians (so `sin(α)` works).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            Value::Angle { degrees, .. } => Some(degrees.to_radians()),
            _ => None,
        }
    }

    /// A line, ray, segment or vector as `p + t·d`.
    pub fn as_linear(&self) -> Option<Linear> {
        match self {
            Value::Line { p, d } => Some(Linear {
                p: *p,
                d: *d,
                extent: Extent::Line,
            }),
            Value::Ray { p, d } => Some(Linear {
                p: *p,
                d: *d,
                extent: Extent::Ray,
            }),
            Value::Segment(a, b) => Some(Linear {
                p: *a,
                d: *b - *a,
                extent: Extent::Segment,
            }),
            Value::Vector { start, d } => Some(Linear {
                p: *start,
                d: *d,
                extent: Extent::Segment,
            }),
            _ => None,
        }
    }

    /// Every point that fixes where it is (for bounds and fitting a view).
    pub fn anchor_points(&self) -> Vec<Pt> {
        match self {
            Value::Text { at, .. } => at.iter().copied().collect(),
            Value::Point(p) => vec![*p],
            Value::Vector { start, d } => vec![*start, *start + *d],
            Value::Segment(a, b) => vec![*a, *b],
            Value::Line { p, d } | Value::Ray { p, d } => vec![*p, *p + *d],
            Value::Circle { centre, radius } => vec![
                *centre - Pt::new(*radius, *radius),
                *centre + Pt::new(*radius, *radius),
            ],
            Value::Polygon(vertices) => vertices.clone(),
            Value::Angle { vertex, .. } => vec![*vertex],
            Value::Number(_) | Value::Bool(_) | Value::Function(_) => Vec::new(),
        }
    }

    /// Refuses values no figure can hold: non-finite numbers, coordinates and radii beyond
    /// [`MAX_COORD`].
    pub(crate) fn check_bounds(&self) -> Result<(), ErrorKind> {
        let numbers: Vec<f64> = match self {
            Value::Number(n) => vec![*n],
            Value::Circle { centre, radius } => vec![centre.x, centre.y, *radius],
            Value::Vector { start, d }
            | Value::Line { p: start, d }
            | Value::Ray { p: start, d } => {
                vec![start.x, start.y, d.x, d.y]
            }
            other => other
                .anchor_points()
                .iter()
                .flat_map(|p| [p.x, p.y])
                .collect(),
        };
        if numbers.iter().any(|n| !n.is_finite()) {
            return Err(ErrorKind::NotFinite);
        }
        let geometric = !matches!(self, Value::Number(_));
        if geometric && numbers.iter().any(|n| n.abs() > MAX_COORD) {
            return Err(ErrorKind::OutOfRange(MAX_COORD));
        }
        Ok(())
    }
}

/// A colour, as `#rrggbb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Color(pub [u8; 3]);

/// The colours `SetColor` knows by name.
pub const PALETTE: &[(&str, Color)] = &[
    ("black", Color([0x00, 0x00, 0x00])),
    ("gray", Color([0x6b, 0x72, 0x80])),
    ("grey", Color([0x6b, 0x72, 0x80])),
    ("red", Color([0xd6, 0x28, 0x28])),
    ("orange", Color([0xe8, 0x71, 0x0a])),
    ("yellow", Color([0xc9, 0xa2, 0x00])),
    ("green", Color([0x2f, 0x9e, 0x44])),
    ("teal", Color([0x0c, 0x85, 0x99])),
    ("blue", Color([0x1c, 0x64, 0xd2])),
    ("purple", Color([0x7b, 0x3f, 0xc4])),
    ("magenta", Color([0xc2, 0x25, 0x9e])),
    ("brown", Color([0x8b, 0x5a, 0x2b])),
];

impl Color {
    /// A palette name (any case) or `#rrggbb`; nothing else.
    pub fn parse(text: &str) -> Option<Color> {
        let text = text.trim();
        if let Some((_, color)) = PALETTE.iter().find(|(n, _)| n.eq_ignore_ascii_case(text)) {
            return Some(*color);
        }
        let hex = text.strip_prefix('#')?;
        if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
        Some(Color([byte(0)?, byte(2)?, byte(4)?]))
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [r, g, b] = self.0;
        write!(f, "#{r:02x}{g:02x}{b:02x}")
    }
}

/// How an object is shown: set by `SetCaption`, `ShowLabel` and `SetColor`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Style {
    pub caption: Option<String>,
    /// `None`: the default for its kind (points and angles are labelled, the rest not
    /// unless captioned).
    pub show_label: Option<bool>,
    pub color: Option<Color>,
}

/// An object of the construction.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub name: String,
    /// The line of the command that made it.
    pub line: usize,
    /// How it was made, as the script would write it (`Circle(A, B, C)`).
    pub definition: String,
    pub value: Value,
    pub style: Style,
    /// Named by the evaluator (an unnamed command), not by the script.
    pub auto_named: bool,
}

impl Object {
    /// Whether its label is drawn.
    pub fn label_shown(&self) -> bool {
        self.style.show_label.unwrap_or(match self.value {
            Value::Point(_) | Value::Angle { .. } => true,
            _ => self.style.caption.is_some(),
        })
    }

    /// The text of its label: the caption, else the name.
    pub fn label(&self) -> &str {
        self.style.caption.as_deref().unwrap_or(&self.name)
    }
}

/// A function of one variable, compiled from its definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    pub name: String,
    pub param: String,
    /// The definition's right-hand side, as written.
    pub body_text: String,
    pub(crate) body: Num,
    /// Operations per value, callees included.
    pub(crate) cost: usize,
}

impl Function {
    /// Its value at `x` (`NaN` where it is undefined).
    pub fn value(&self, x: f64) -> f64 {
        self.body.eval(x)
    }
}

/// A numeric expression of one variable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Num {
    Const(f64),
    Var,
    Neg(Box<Num>),
    Binary(crate::ast::BinaryOp, Box<Num>, Box<Num>),
    Apply(MathFn, Box<Num>),
    Call(Arc<Function>, Box<Num>),
}

impl Num {
    pub(crate) fn eval(&self, x: f64) -> f64 {
        use crate::ast::BinaryOp as B;
        match self {
            Num::Const(c) => *c,
            Num::Var => x,
            Num::Neg(inner) => -inner.eval(x),
            Num::Binary(op, a, b) => {
                let (a, b) = (a.eval(x), b.eval(x));
                match op {
                    B::Add => a + b,
                    B::Sub => a - b,
                    B::Mul => a * b,
                    B::Div => a / b,
                    B::Pow => a.powf(b),
                }
            }
            Num::Apply(f, inner) => f.apply(inner.eval(x)),
            Num::Call(function, inner) => function.value(inner.eval(x)),
        }
    }
}

/// A maths function of one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MathFn {
    Sqrt,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Abs,
    Exp,
    Ln,
}

impl MathFn {
    pub(crate) fn by_name(name: &str) -> Option<MathFn> {
        Some(match name {
            "sqrt" => MathFn::Sqrt,
            "sin" => MathFn::Sin,
            "cos" => MathFn::Cos,
            "tan" => MathFn::Tan,
            "asin" => MathFn::Asin,
            "acos" => MathFn::Acos,
            "atan" => MathFn::Atan,
            "abs" => MathFn::Abs,
            "exp" => MathFn::Exp,
            // GeoGebra's `log` is the natural logarithm too.
            "ln" | "log" => MathFn::Ln,
            _ => return None,
        })
    }

    pub(crate) fn apply(self, v: f64) -> f64 {
        match self {
            MathFn::Sqrt => v.sqrt(),
            MathFn::Sin => v.sin(),
            MathFn::Cos => v.cos(),
            MathFn::Tan => v.tan(),
            MathFn::Asin => v.asin(),
            MathFn::Acos => v.acos(),
            MathFn::Atan => v.atan(),
            MathFn::Abs => v.abs(),
            MathFn::Exp => v.exp(),
            MathFn::Ln => v.ln(),
        }
    }
}

/// The result of evaluating a script.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Construction {
    /// Every object built, in order.
    pub objects: Vec<Object>,
    /// A command that could not be built, each with why (its objects are not in `objects`).
    pub errors: Vec<crate::error::GeoError>,
}

impl Construction {
    pub fn get(&self, name: &str) -> Option<&Object> {
        self.objects.iter().find(|o| o.name == name)
    }

    /// The point named `name`.
    pub fn point(&self, name: &str) -> Option<Pt> {
        match self.get(name)?.value {
            Value::Point(p) => Some(p),
            _ => None,
        }
    }

    /// The number (or angle, in degrees) named `name`.
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.get(name)?.value {
            Value::Number(n) => Some(n),
            Value::Angle { degrees, .. } => Some(degrees),
            _ => None,
        }
    }
}
