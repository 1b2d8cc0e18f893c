//! The SVG checked as XML: well-formed, only the elements and attributes the renderer is
//! allowed, text escaped, objects inside the canvas, the same bytes every time.

use deepsolve_geometry::svg::ELEMENTS;
use deepsolve_geometry::{Axes, RenderOptions, check, render_svg};
use quick_xml::Reader;
use quick_xml::events::Event;

/// One element, its attributes (unescaped) and its text (references resolved).
#[derive(Debug, Clone)]
pub(crate) struct Element {
    pub(crate) name: String,
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) text: String,
}

impl Element {
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn number(&self, key: &str) -> f64 {
        self.attr(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{} has no numeric {key}: {:?}", self.name, self.attrs))
    }
}

/// Parses `svg` strictly (one root, every element closed, names matched) into its elements in
/// document order; panics on anything malformed.
pub(crate) fn parse(svg: &str) -> Vec<Element> {
    let mut reader = Reader::from_str(svg);
    let mut elements: Vec<Element> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut roots = 0;
    loop {
        let event = reader
            .read_event()
            .unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let closed = matches!(event, Event::Empty(_));
                if open.is_empty() {
                    roots += 1;
                }
                let name = e.name().as_ref().to_string();
                let attrs = e
                    .attributes()
                    .map(|a| {
                        let a = a.unwrap_or_else(|err| panic!("bad attribute: {err}"));
                        let key = a.key.as_ref().to_string();
                        (
                            key,
                            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                .unwrap()
                                .into_owned(),
                        )
                    })
                    .collect();
                elements.push(Element {
                    name,
                    attrs,
                    text: String::new(),
                });
                if !closed {
                    open.push(elements.len() - 1);
                }
            }
            Event::End(_) => {
                open.pop().expect("an end tag closes an open element");
            }
            Event::Text(t) => {
                let text = t.xml10_content().into_owned();
                if let Some(&i) = open.last() {
                    elements[i].text.push_str(&text);
                } else {
                    assert!(text.trim().is_empty(), "text outside the root: {text:?}");
                }
            }
            Event::GeneralRef(r) => {
                let c = match &*r {
                    "amp" => '&',
                    "lt" => '<',
                    "gt" => '>',
                    "quot" => '"',
                    "apos" => '\'',
                    _ => r
                        .resolve_char_ref()
                        .unwrap()
                        .expect("a character reference"),
                };
                let i = *open.last().expect("a reference inside an element");
                elements[i].text.push(c);
            }
            Event::Eof => break,
            other => panic!("unexpected XML content: {other:?}"),
        }
    }
    assert!(open.is_empty(), "unclosed elements");
    assert_eq!(roots, 1, "one root element");
    elements
}

/// What every figure must be: an `svg` root of fixed size with a viewBox, only the renderer's
/// elements, no attribute that runs or loads anything.
pub(crate) fn assert_safe(svg: &str) -> Vec<Element> {
    let elements = parse(svg);
    let root = &elements[0];
    assert_eq!(root.name, "svg");
    assert_eq!(root.attr("xmlns"), Some("http://www.w3.org/2000/svg"));
    assert!(root.attr("viewBox").is_some() && root.attr("width").is_some());
    for element in &elements {
        assert!(
            ELEMENTS.contains(&element.name.as_str()),
            "<{}>",
            element.name
        );
        for (key, value) in &element.attrs {
            let key = key.to_ascii_lowercase();
            assert!(
                !key.starts_with("on") && !key.contains("href") && key != "style",
                "attribute {key}"
            );
            assert!(!value.contains("url("), "{key}={value}");
        }
    }
    let lower = svg.to_ascii_lowercase();
    for forbidden in [
        "<script",
        "<foreignobject",
        "<style",
        "<image",
        "<use",
        "javascript:",
    ] {
        assert!(!lower.contains(forbidden), "{forbidden}");
    }
    elements
}

fn render(script: &str) -> (String, Vec<Element>) {
    let checked = check(script);
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let svg = render_svg(&checked.construction, &RenderOptions::default());
    let elements = assert_safe(&svg);
    (svg, elements)
}

fn canvas(elements: &[Element]) -> (f64, f64) {
    (elements[0].number("width"), elements[0].number("height"))
}

fn of_class<'a>(elements: &'a [Element], class: &str) -> Vec<&'a Element> {
    let mut out = Vec::new();
    let mut inside = false;
    for e in elements {
        if e.name == "g" {
            inside = e.attr("class") == Some(class);
            continue;
        }
        if inside {
            out.push(e);
        }
    }
    out
}

const FIGURE: &str = "A = (0, 0)\nB = (6, 0)\nC = (1, 4)\nt = Polygon(A, B, C)\nc = Circle(A, B, C)\nM = Midpoint(A, B)\ng = Line(C, M)\nh = Ray(A, C)\nv = Vector(B, C)\nα = Angle(C, A, B)\nβ = Angle(A, B, C)\nH = Intersect(PerpendicularLine(C, Line(A, B)), Line(A, B))\nr = Angle(C, H, B)\nT = Text(\"Find ∠C\", (3, 5))\nSetCaption(β, \"∠B\")";

#[test]
fn a_figure_has_every_object_inside_the_canvas() {
    let (_, elements) = render(FIGURE);
    let (w, h) = canvas(&elements);
    assert_eq!(w, 640.0);
    assert!((320.0..=640.0).contains(&h));
    let points = of_class(&elements, "point");
    assert_eq!(points.len(), 5, "A, B, C, M, H");
    for p in &points {
        let (x, y) = (p.number("cx"), p.number("cy"));
        assert!(
            x > 20.0 && x < w - 20.0 && y > 20.0 && y < h - 20.0,
            "({x}, {y})"
        );
    }
    // Lines and rays are clipped to the canvas.
    for line in of_class(&elements, "line")
        .iter()
        .chain(&of_class(&elements, "ray"))
    {
        for (kx, ky) in [("x1", "y1"), ("x2", "y2")] {
            let (x, y) = (line.number(kx), line.number(ky));
            assert!((-0.01..=w + 0.01).contains(&x) && (-0.01..=h + 0.01).contains(&y));
        }
    }
    let circle = of_class(&elements, "circle")[0];
    let (cx, cy, r) = (circle.number("cx"), circle.number("cy"), circle.number("r"));
    assert!(cx - r >= 0.0 && cx + r <= w && cy - r >= 0.0 && cy + r <= h);
    assert_eq!(of_class(&elements, "polygon")[0].name, "polygon");
    assert_eq!(of_class(&elements, "vector").len(), 2, "a shaft and a head");
}

#[test]
fn angles_are_marked_with_their_values() {
    let (_, elements) = render(FIGURE);
    let labels: Vec<&str> = of_class(&elements, "labels")
        .iter()
        .map(|e| e.text.as_str())
        .collect();
    for expected in ["A", "B", "C", "M", "H", "75.96°", "∠B = 38.66°", "90°"] {
        assert!(labels.contains(&expected), "{expected} in {labels:?}");
    }
    let acute = of_class(&elements, "angle");
    assert!(
        acute
            .iter()
            .any(|e| e.name == "path" && e.attr("d").is_some_and(|d| d.contains(" A ")))
    );
    assert!(
        acute.iter().any(|e| e.name == "polygon"),
        "the right angle is a square"
    );
    let texts = of_class(&elements, "text");
    assert_eq!(texts[0].text, "Find ∠C");
}

#[test]
fn captions_and_hidden_labels_are_honoured_and_escaped() {
    let (svg, elements) = render(
        "A = (0, 0)\nB = (2, 0)\nc = Circle(A, 1)\nSetCaption(A, \"<script>alert('x')</script> & \\\"q\\\"\")\nShowLabel(B, false)\nSetCaption(c, \"k\")\nSetColor(c, \"teal\")\nText(\"</text><script>\")",
    );
    let labels: Vec<&str> = of_class(&elements, "labels")
        .iter()
        .map(|e| e.text.as_str())
        .collect();
    assert!(
        labels.contains(&"<script>alert('x')</script> & \"q\""),
        "{labels:?}"
    );
    assert!(!labels.contains(&"B"), "ShowLabel(B, false)");
    assert!(labels.contains(&"k"), "a caption shows the label");
    assert!(svg.contains("&lt;script&gt;") && !svg.contains("<script"));
    let circle = of_class(&elements, "circle")[0];
    assert_eq!(circle.attr("stroke"), Some("#0c8599"));
    assert_eq!(of_class(&elements, "text")[0].text, "</text><script>");
}

#[test]
fn function_graphs_come_with_axes_and_stay_in_the_view() {
    let (_, elements) = render("f(x) = x^2 - 2\ng(x) = tan(x)");
    let grid = of_class(&elements, "grid");
    assert!(!grid.is_empty(), "axes and grid for a function");
    let graphs = of_class(&elements, "function");
    assert_eq!(graphs.len(), 2);
    let (w, h) = canvas(&elements);
    for graph in graphs {
        let d = graph.attr("d").unwrap();
        let numbers: Vec<f64> = d
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        assert!(numbers.len() > 100, "{d}");
        for pair in numbers.chunks(2) {
            assert!((-0.01..=w + 0.01).contains(&pair[0]) && (-0.01..=h + 0.01).contains(&pair[1]));
        }
    }
    let hidden = check("f(x) = x");
    let svg = render_svg(&hidden.construction, &RenderOptions { axes: Axes::Hide });
    assert!(of_class(&assert_safe(&svg), "grid").is_empty());
}

#[test]
fn rendering_is_deterministic_and_degenerate_views_are_widened() {
    let (first, _) = render(FIGURE);
    let (second, _) = render(FIGURE);
    assert_eq!(first, second);
    // One point, or a horizontal segment: still a canvas of sensible size, the objects inside.
    for script in [
        "A = (3, 3)",
        "s = Segment((0, 0), (10, 0))",
        "T = Text(\"alone\")",
    ] {
        let (_, elements) = render(script);
        let (w, h) = canvas(&elements);
        assert!(w == 640.0 && h >= 320.0, "{script}");
    }
}
