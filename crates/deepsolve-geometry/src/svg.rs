//! The construction drawn as SVG, by us: a fixed width, a viewport fitted to every object
//! with a margin, lines and rays clipped to it, labels (captions and `ShowLabel` honoured),
//! angle marks with their values, colours, and axes with a grid when asked (or when a
//! function is drawn).
//!
//! The document is safe to show in a page: every text is XML-escaped (characters XML cannot
//! hold are dropped), there is no script, no style sheet, no link or external reference and
//! no `foreignObject` — only `svg`, `title`, `rect`, `g`, `line`, `path`, `circle`,
//! `polygon` and `text` with presentation attributes. The same construction always gives
//! the same bytes.

use std::fmt::Write;

use crate::geom::Pt;
use crate::table::format_number;
use crate::value::{Construction, Function, Object, Value};

/// The width of every figure, in px.
pub const WIDTH: f64 = 640.0;
const MIN_HEIGHT: f64 = 320.0;
const MAX_HEIGHT: f64 = 640.0;
/// Room for labels around the fitted objects, in px.
const MARGIN_PX: f64 = 36.0;
/// Samples across the view per function graph.
const SAMPLES: usize = 480;

/// The elements the renderer writes; nothing else ever appears.
pub const ELEMENTS: &[&str] = &[
    "svg", "title", "rect", "g", "line", "path", "circle", "polygon", "text",
];

const INK: &str = "#374151";
const POINT: &str = "#1c64d2";
const ANGLE: &str = "#e8710a";
const FUNCTION: &str = "#c2259e";
const GRID: &str = "#e5e7eb";
const AXIS: &str = "#9ca3af";

/// Axes and grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Axes {
    /// Shown when the construction has a function graph.
    #[default]
    Auto,
    Show,
    Hide,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderOptions {
    pub axes: Axes,
}

/// A world rectangle.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rect {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Rect {
    fn width(&self) -> f64 {
        self.x1 - self.x0
    }

    fn height(&self) -> f64 {
        self.y1 - self.y0
    }

    fn around(points: &[Pt]) -> Option<Rect> {
        let first = points.first()?;
        let mut r = Rect {
            x0: first.x,
            y0: first.y,
            x1: first.x,
            y1: first.y,
        };
        for p in points {
            r.x0 = r.x0.min(p.x);
            r.y0 = r.y0.min(p.y);
            r.x1 = r.x1.max(p.x);
            r.y1 = r.y1.max(p.y);
        }
        Some(r)
    }

    /// At least `min` wide and high (around the same centre), then `pad` larger on each side.
    fn padded(self, min: f64, pad: f64) -> Rect {
        let (cx, cy) = ((self.x0 + self.x1) / 2.0, (self.y0 + self.y1) / 2.0);
        let w = self.width().max(min) / 2.0 + pad;
        let h = self.height().max(min) / 2.0 + pad;
        Rect {
            x0: cx - w,
            y0: cy - h,
            x1: cx + w,
            y1: cy + h,
        }
    }
}

/// World to canvas.
struct View {
    world: Rect,
    scale: f64,
    height: f64,
}

impl View {
    fn fit(world: Rect) -> View {
        let inner_w = WIDTH - 2.0 * MARGIN_PX;
        let height = (inner_w * world.height() / world.width() + 2.0 * MARGIN_PX)
            .clamp(MIN_HEIGHT, MAX_HEIGHT)
            .round();
        let inner_h = height - 2.0 * MARGIN_PX;
        let scale = (inner_w / world.width()).min(inner_h / world.height());
        // The whole canvas, in world units: the fitted box centred in it.
        let (cx, cy) = ((world.x0 + world.x1) / 2.0, (world.y0 + world.y1) / 2.0);
        let (half_w, half_h) = (WIDTH / scale / 2.0, height / scale / 2.0);
        View {
            world: Rect {
                x0: cx - half_w,
                y0: cy - half_h,
                x1: cx + half_w,
                y1: cy + half_h,
            },
            scale,
            height,
        }
    }

    fn x(&self, x: f64) -> f64 {
        (x - self.world.x0) * self.scale
    }

    fn y(&self, y: f64) -> f64 {
        (self.world.y1 - y) * self.scale
    }

    fn at(&self, p: Pt) -> Pt {
        Pt::new(self.x(p.x), self.y(p.y))
    }

    /// `px` pixels, in world units.
    fn world_len(&self, px: f64) -> f64 {
        px / self.scale
    }
}

/// The construction as an SVG document.
pub fn render_svg(construction: &Construction, options: &RenderOptions) -> String {
    let objects = &construction.objects;
    let functions: Vec<&Function> = objects
        .iter()
        .filter_map(|o| match &o.value {
            Value::Function(f) => Some(f.as_ref()),
            _ => None,
        })
        .collect();
    let view = View::fit(world_box(objects, &functions));
    let axes = match options.axes {
        Axes::Auto => !functions.is_empty(),
        Axes::Show => true,
        Axes::Hide => false,
    };
    let mut out = Svg::new(&view, objects.len());
    if axes {
        out.axes(&view);
    }
    let centre = points_centre(objects);
    let mut labels = Labels::default();
    let mut loose_texts = 0;
    // Areas first, points last: nothing hides a point or a label.
    for pass in [Layer::Areas, Layer::Curves, Layer::Marks, Layer::Points] {
        for object in objects.iter().filter(|o| layer(&o.value) == pass) {
            out.object(&view, object, centre, &mut labels, &mut loose_texts);
        }
    }
    out.labels(&labels);
    out.finish()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Areas,
    Curves,
    Marks,
    Points,
    Hidden,
}

fn layer(value: &Value) -> Layer {
    match value {
        Value::Polygon(_) => Layer::Areas,
        Value::Segment(..)
        | Value::Line { .. }
        | Value::Ray { .. }
        | Value::Circle { .. }
        | Value::Vector { .. }
        | Value::Function(_) => Layer::Curves,
        Value::Angle { .. } | Value::Text { .. } => Layer::Marks,
        Value::Point(_) => Layer::Points,
        Value::Number(_) | Value::Bool(_) => Layer::Hidden,
    }
}

/// The world box to show: every anchored object with a margin; with only function graphs,
/// x from -5 to 5 and their values there.
fn world_box(objects: &[Object], functions: &[&Function]) -> Rect {
    let anchors: Vec<Pt> = objects
        .iter()
        .flat_map(|o| o.value.anchor_points())
        .collect();
    let fitted = Rect::around(&anchors).unwrap_or_else(|| function_box(functions));
    let size = fitted.width().max(fitted.height());
    let min = (size * 0.25).max(1e-3);
    fitted.padded(min, size.max(min) * 0.06)
}

fn function_box(functions: &[&Function]) -> Rect {
    let (x0, x1) = (-5.0, 5.0);
    let mut ys = vec![0.0];
    for f in functions {
        for i in 0..=100 {
            let x = x0 + (x1 - x0) * f64::from(i) / 100.0;
            let y = f.value(x);
            if y.is_finite() {
                ys.push(y.clamp(-20.0, 20.0));
            }
        }
    }
    let (y0, y1) = ys
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(*y), hi.max(*y)));
    Rect { x0, y0, x1, y1 }
}

/// The centre of the figure's points, which point labels are pushed away from.
fn points_centre(objects: &[Object]) -> Pt {
    let points: Vec<Pt> = objects
        .iter()
        .filter_map(|o| match o.value {
            Value::Point(p) => Some(p),
            _ => None,
        })
        .collect();
    if points.is_empty() {
        return Pt::default();
    }
    points.iter().fold(Pt::default(), |acc, p| acc + *p) / points.len() as f64
}

/// Where an angle is and which way it turns.
struct AngleMark {
    vertex: Pt,
    /// The first arm's direction, radians.
    from: f64,
    /// The turn to the second arm, radians, counter-clockwise positive.
    sweep: f64,
    /// 90°: marked with a square.
    right: bool,
}

/// A label to draw last, on top: text at a canvas position with an anchor.
struct Label {
    at: Pt,
    text: String,
    anchor: &'static str,
    color: String,
}

#[derive(Default)]
struct Labels(Vec<Label>);

impl Labels {
    /// A label `offset` px from canvas point `at` in direction `dir` (canvas coordinates).
    fn push(&mut self, at: Pt, dir: Pt, offset: f64, text: &str, color: &str) {
        let dir = if dir.norm() > 1e-9 {
            dir.unit()
        } else {
            Pt::new(0.7, -0.7)
        };
        let p = at + dir * offset;
        let anchor = if dir.x > 0.35 {
            "start"
        } else if dir.x < -0.35 {
            "end"
        } else {
            "middle"
        };
        // Text sits on its baseline: a label below its point moves down by its height.
        let baseline = if dir.y > 0.35 {
            10.0
        } else if dir.y < -0.35 {
            0.0
        } else {
            5.0
        };
        self.0.push(Label {
            at: Pt::new(p.x, p.y + baseline),
            text: text.to_string(),
            anchor,
            color: color.to_string(),
        });
    }
}

struct Svg {
    out: String,
}

impl Svg {
    fn new(view: &View, objects: usize) -> Svg {
        let mut out = String::new();
        let (w, h) = (num(WIDTH), num(view.height));
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" font-family=\"sans-serif\" font-size=\"14\">"
        );
        let _ = write!(
            out,
            "<title>{}</title><rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>",
            escape(&format!("A figure of {objects} objects"))
        );
        Svg { out }
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }

    fn object(
        &mut self,
        view: &View,
        object: &Object,
        centre: Pt,
        labels: &mut Labels,
        loose_texts: &mut usize,
    ) {
        let color = object.style.color.map(|c| c.to_string());
        let ink = |default: &str| color.clone().unwrap_or_else(|| default.to_string());
        let label = object.label_shown().then(|| object.label().to_string());
        let _ = write!(self.out, "<g class=\"{}\">", object.value.kind());
        match &object.value {
            Value::Point(p) => {
                let at = view.at(*p);
                let c = ink(POINT);
                let _ = write!(
                    self.out,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{c}\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>",
                    num(at.x),
                    num(at.y)
                );
                if let Some(text) = label {
                    let away = view.at(*p) - view.at(centre);
                    labels.push(at, away, 10.0, &text, &c);
                }
            }
            Value::Segment(a, b) => {
                let c = ink(INK);
                self.line_between(view.at(*a), view.at(*b), &c, 2.0);
                if let Some(text) = label {
                    let (a, b) = (view.at(*a), view.at(*b));
                    labels.push((a + b) / 2.0, (b - a).perp(), 8.0, &text, &c);
                }
            }
            Value::Line { p, d } | Value::Ray { p, d } => {
                let ray = matches!(object.value, Value::Ray { .. });
                let c = ink(INK);
                let start = if ray { 0.0 } else { f64::NEG_INFINITY };
                if let Some((t0, t1)) = clip(*p, *d, start, f64::INFINITY, &view.world) {
                    let (a, b) = (view.at(*p + *d * t0), view.at(*p + *d * t1));
                    self.line_between(a, b, &c, 1.5);
                    if let Some(text) = label {
                        let at = a + (b - a) * 0.85;
                        labels.push(at, (b - a).perp(), 8.0, &text, &c);
                    }
                }
            }
            Value::Vector { start, d } => {
                let c = ink(INK);
                let (a, b) = (view.at(*start), view.at(*start + *d));
                self.arrow(a, b, &c);
                if let Some(text) = label {
                    labels.push((a + b) / 2.0, (b - a).perp(), 8.0, &text, &c);
                }
            }
            Value::Circle { centre: c0, radius } => {
                let c = ink(INK);
                let at = view.at(*c0);
                let _ = write!(
                    self.out,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>",
                    num(at.x),
                    num(at.y),
                    num(radius * view.scale)
                );
                if let Some(text) = label {
                    let rim = Pt::new(1.0, -1.0).unit();
                    let on = at + rim * (radius * view.scale);
                    labels.push(on, rim, 6.0, &text, &c);
                }
            }
            Value::Polygon(vertices) => {
                let c = ink(INK);
                let points: Vec<String> = vertices
                    .iter()
                    .map(|v| {
                        let p = view.at(*v);
                        format!("{},{}", num(p.x), num(p.y))
                    })
                    .collect();
                let _ = write!(
                    self.out,
                    "<polygon points=\"{}\" fill=\"{c}\" fill-opacity=\"0.1\" stroke=\"{c}\" stroke-width=\"2\" stroke-linejoin=\"round\"/>",
                    points.join(" ")
                );
                if let Some(text) = label {
                    let middle = vertices.iter().fold(Pt::default(), |acc, v| acc + *v)
                        / vertices.len() as f64;
                    labels.push(view.at(middle), Pt::default(), 0.0, &text, &c);
                }
            }
            Value::Angle {
                vertex,
                from,
                sweep,
                degrees,
            } => {
                let c = ink(ANGLE);
                // An angle's label is its size; a caption names it (`∠B = 36.87°`).
                let text = object.label_shown().then(|| {
                    let size = format!("{}°", format_short(*degrees));
                    match &object.style.caption {
                        Some(caption) => format!("{caption} = {size}"),
                        None => size,
                    }
                });
                let mark = AngleMark {
                    vertex: *vertex,
                    from: *from,
                    sweep: *sweep,
                    right: (*degrees - 90.0).abs() < 0.05,
                };
                self.angle(view, &mark, &c, text, labels);
            }
            Value::Text { text, at } => {
                let c = ink("#111827");
                let position = match at {
                    Some(p) => view.at(*p),
                    None => {
                        *loose_texts += 1;
                        Pt::new(12.0, 8.0 + 18.0 * *loose_texts as f64)
                    }
                };
                let _ = write!(
                    self.out,
                    "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{}</text>",
                    num(position.x),
                    num(position.y),
                    escape(text)
                );
            }
            Value::Function(f) => {
                let c = ink(FUNCTION);
                let end = self.graph(view, f, &c);
                if let (Some(text), Some(end)) = (label, end) {
                    labels.push(end, Pt::new(-1.0, -1.0), 8.0, &text, &c);
                }
            }
            Value::Number(_) | Value::Bool(_) => {}
        }
        self.out.push_str("</g>");
    }

    fn line_between(&mut self, a: Pt, b: Pt, color: &str, width: f64) {
        let _ = write!(
            self.out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{color}\" stroke-width=\"{}\" stroke-linecap=\"round\"/>",
            num(a.x),
            num(a.y),
            num(b.x),
            num(b.y),
            num(width)
        );
    }

    /// A shaft and a head at `b`.
    fn arrow(&mut self, a: Pt, b: Pt, color: &str) {
        self.line_between(a, b, color, 2.0);
        let length = a.dist(b);
        if length < 1.0 {
            return;
        }
        let back = (a - b).unit();
        let size = 11.0_f64.min(length * 0.5);
        let base = b + back * size;
        let side = back.perp() * (size * 0.45);
        let corners = [b, base + side, base - side];
        let points: Vec<String> = corners
            .iter()
            .map(|p| format!("{},{}", num(p.x), num(p.y)))
            .collect();
        let _ = write!(
            self.out,
            "<polygon points=\"{}\" fill=\"{color}\"/>",
            points.join(" ")
        );
    }

    /// The mark of an angle: a wedge and its arc (a square for a right angle), and its value.
    fn angle(
        &mut self,
        view: &View,
        mark: &AngleMark,
        color: &str,
        text: Option<String>,
        labels: &mut Labels,
    ) {
        let &AngleMark {
            vertex,
            from,
            sweep,
            right,
        } = mark;
        let v = view.at(vertex);
        let radius = 22.0;
        let world_r = view.world_len(radius);
        let u = Pt::new(from.cos(), from.sin());
        let w = Pt::new((from + sweep).cos(), (from + sweep).sin());
        let (p1, p2) = (view.at(vertex + u * world_r), view.at(vertex + w * world_r));
        if right {
            let side = view.world_len(14.0);
            let corners = [
                vertex,
                vertex + u * side,
                vertex + (u + w) * side,
                vertex + w * side,
            ];
            let points: Vec<String> = corners
                .iter()
                .map(|p| {
                    let p = view.at(*p);
                    format!("{},{}", num(p.x), num(p.y))
                })
                .collect();
            let _ = write!(
                self.out,
                "<polygon points=\"{}\" fill=\"{color}\" fill-opacity=\"0.2\" stroke=\"{color}\" stroke-width=\"1.5\"/>",
                points.join(" ")
            );
        } else {
            // The canvas's y runs down, so a counter-clockwise turn in the plane is drawn
            // with SVG's negative sweep.
            let flag = if sweep > 0.0 { 0 } else { 1 };
            let r = num(radius);
            let _ = write!(
                self.out,
                "<path d=\"M {} {} L {} {} A {r} {r} 0 0 {flag} {} {} Z\" fill=\"{color}\" fill-opacity=\"0.2\" stroke=\"none\"/>",
                num(v.x),
                num(v.y),
                num(p1.x),
                num(p1.y),
                num(p2.x),
                num(p2.y)
            );
            let _ = write!(
                self.out,
                "<path d=\"M {} {} A {r} {r} 0 0 {flag} {} {}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"/>",
                num(p1.x),
                num(p1.y),
                num(p2.x),
                num(p2.y)
            );
        }
        if let Some(text) = text {
            let middle = Pt::new((from + sweep / 2.0).cos(), (from + sweep / 2.0).sin());
            let dir = view.at(vertex + middle) - v;
            labels.push(v, dir, radius + 8.0, &text, color);
        }
    }

    /// A function's graph across the view, broken where it is undefined or leaves the view
    /// through an asymptote; returns the canvas point of its last drawn sample.
    fn graph(&mut self, view: &View, f: &Function, color: &str) -> Option<Pt> {
        let world = view.world;
        let step = world.width() / SAMPLES as f64;
        let mut path = String::new();
        let mut pen_down = false;
        let mut last = None;
        let mut previous: Option<Pt> = None;
        for i in 0..=SAMPLES {
            let x = world.x0 + step * i as f64;
            let here = Pt::new(x, f.value(x));
            let Some(before) = previous.filter(|_| here.is_finite()) else {
                previous = here.is_finite().then_some(here);
                pen_down = false;
                continue;
            };
            previous = Some(here);
            let jump = (here.y - before.y).abs() > 2.0 * world.height();
            let crosses = (before.y > world.y1 && here.y < world.y0)
                || (before.y < world.y0 && here.y > world.y1);
            if jump && crosses {
                pen_down = false;
                continue;
            }
            let Some((t0, t1)) = clip(before, here - before, 0.0, 1.0, &world) else {
                pen_down = false;
                continue;
            };
            let (a, b) = (
                view.at(before + (here - before) * t0),
                view.at(before + (here - before) * t1),
            );
            if !pen_down || t0 > 0.0 {
                let _ = write!(path, "M {} {} ", num(a.x), num(a.y));
            }
            let _ = write!(path, "L {} {} ", num(b.x), num(b.y));
            pen_down = t1 >= 1.0;
            last = Some(b);
        }
        if !path.is_empty() {
            let _ = write!(
                self.out,
                "<path d=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-linejoin=\"round\"/>",
                path.trim_end()
            );
        }
        last
    }

    /// A grid at a round step, and the axes through the origin when it is in view.
    fn axes(&mut self, view: &View) {
        let world = view.world;
        let step = nice_step(world.width().max(world.height()) / 10.0);
        let mut grid = String::new();
        let mut ticks = String::new();
        let first = (world.x0 / step).ceil() as i64;
        let last = (world.x1 / step).floor() as i64;
        for k in first..=last {
            let x = view.x(k as f64 * step);
            let _ = write!(grid, "M {} 0 L {} {} ", num(x), num(x), num(view.height));
            if k != 0 {
                let y = (view.y(0.0).clamp(0.0, view.height) + 14.0).min(view.height - 4.0);
                let _ = write!(
                    ticks,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    num(x),
                    num(y),
                    escape(&format_number(k as f64 * step))
                );
            }
        }
        let first = (world.y0 / step).ceil() as i64;
        let last = (world.y1 / step).floor() as i64;
        for k in first..=last {
            let y = view.y(k as f64 * step);
            let _ = write!(grid, "M 0 {} L {} {} ", num(y), num(WIDTH), num(y));
            if k != 0 {
                let x = view.x(0.0).clamp(4.0, WIDTH - 40.0);
                let _ = write!(
                    ticks,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"start\">{}</text>",
                    num(x + 4.0),
                    num(y - 3.0),
                    escape(&format_number(k as f64 * step))
                );
            }
        }
        let _ = write!(
            self.out,
            "<g class=\"grid\"><path d=\"{}\" fill=\"none\" stroke=\"{GRID}\" stroke-width=\"1\"/>",
            grid.trim_end()
        );
        if (world.y0..=world.y1).contains(&0.0) {
            let y = view.y(0.0);
            self.line_between(Pt::new(0.0, y), Pt::new(WIDTH, y), AXIS, 1.2);
        }
        if (world.x0..=world.x1).contains(&0.0) {
            let x = view.x(0.0);
            self.line_between(Pt::new(x, 0.0), Pt::new(x, view.height), AXIS, 1.2);
        }
        let _ = write!(
            self.out,
            "<g font-size=\"11\" fill=\"{AXIS}\">{ticks}</g></g>"
        );
    }

    fn labels(&mut self, labels: &Labels) {
        if labels.0.is_empty() {
            return;
        }
        self.out.push_str("<g class=\"labels\">");
        for label in &labels.0 {
            let _ = write!(
                self.out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"{}\">{}</text>",
                num(label.at.x),
                num(label.at.y),
                label.anchor,
                label.color,
                escape(&label.text)
            );
        }
        self.out.push_str("</g>");
    }
}

/// The part `t0..t1` (within `from..to`) of `p + t·d` inside `r` (Liang–Barsky), if any.
fn clip(p: Pt, d: Pt, from: f64, to: f64, r: &Rect) -> Option<(f64, f64)> {
    let (mut t0, mut t1) = (from, to);
    for (q, s) in [
        (-d.x, p.x - r.x0),
        (d.x, r.x1 - p.x),
        (-d.y, p.y - r.y0),
        (d.y, r.y1 - p.y),
    ] {
        if q == 0.0 {
            if s < 0.0 {
                return None;
            }
            continue;
        }
        let t = s / q;
        if q < 0.0 {
            t0 = t0.max(t);
        } else {
            t1 = t1.min(t);
        }
    }
    (t0 <= t1 && t0.is_finite() && t1.is_finite()).then_some((t0, t1))
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
}

/// A canvas coordinate: two decimals at most.
fn num(v: f64) -> String {
    let text = format!("{:.2}", num_f(v));
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A canvas coordinate kept within a range any renderer handles (lines clipped to the view
/// are already inside; a huge circle's radius is not).
fn num_f(v: f64) -> f64 {
    if v.is_finite() {
        v.clamp(-1.0e7, 1.0e7)
    } else {
        0.0
    }
}

/// An angle's size on the figure: two decimals at most.
fn format_short(degrees: f64) -> String {
    let text = format!("{degrees:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Text for XML content or a quoted attribute: the five special characters escaped, and
/// characters XML 1.0 cannot hold (most control characters, U+FFFE, U+FFFF) dropped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if is_xml_char(c) => out.push(c),
            _ => {}
        }
    }
    out
}

fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_drops_what_xml_cannot_hold() {
        assert_eq!(
            escape("<script>\"a\" & 'b'\u{0}\u{1b}\u{fffe}é"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;é"
        );
    }

    #[test]
    fn clips_lines_to_the_view() {
        let r = Rect {
            x0: 0.0,
            y0: 0.0,
            x1: 10.0,
            y1: 10.0,
        };
        let (t0, t1) = clip(
            Pt::new(5.0, 5.0),
            Pt::new(1.0, 0.0),
            f64::NEG_INFINITY,
            f64::INFINITY,
            &r,
        )
        .unwrap();
        assert_eq!((t0, t1), (-5.0, 5.0));
        assert!(
            clip(
                Pt::new(5.0, 20.0),
                Pt::new(1.0, 0.0),
                f64::NEG_INFINITY,
                f64::INFINITY,
                &r
            )
            .is_none()
        );
        let ray = clip(Pt::new(5.0, 5.0), Pt::new(0.0, 1.0), 0.0, f64::INFINITY, &r).unwrap();
        assert_eq!(ray, (0.0, 5.0));
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.2), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
    }
}
