//! The construction as a Markdown table of objects and their coordinates, for a model to
//! read.

use crate::error::Lang;
use crate::geom::Pt;
use crate::value::{Construction, Object, Value};

/// A number rounded to 4 decimals, without trailing zeros (`2`, `-0.5`, `1.4142`).
pub fn format_number(n: f64) -> String {
    let text = format!("{n:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

pub fn format_point(p: Pt) -> String {
    format!("({}, {})", format_number(p.x), format_number(p.y))
}

/// The words of the table, per language.
struct Words {
    header: &'static str,
    at: &'static str,
    from: &'static str,
    to: &'static str,
    through: &'static str,
    length: &'static str,
    centre: &'static str,
    radius: &'static str,
    area: &'static str,
}

const EN: Words = Words {
    header: "| name | type | definition | value |",
    at: "at",
    from: "from",
    to: "to",
    through: "through",
    length: "length",
    centre: "centre",
    radius: "radius",
    area: "area",
};

const ZH: Words = Words {
    header: "| 名称 | 类型 | 定义 | 值 |",
    at: "位于",
    from: "起点",
    to: "到",
    through: "经过",
    length: "长度",
    centre: "圆心",
    radius: "半径",
    area: "面积",
};

fn words(lang: Lang) -> &'static Words {
    match lang {
        Lang::En => &EN,
        Lang::Zh => &ZH,
    }
}

/// What the table says an object is, in `lang`: coordinates, lengths, equations, sizes.
pub fn describe(value: &Value, lang: Lang) -> String {
    let w = words(lang);
    match value {
        Value::Number(n) => format_number(*n),
        Value::Bool(b) => b.to_string(),
        Value::Text { text, at } => match at {
            Some(p) => format!("\"{text}\" {} {}", w.at, format_point(*p)),
            None => format!("\"{text}\""),
        },
        Value::Point(p) => format_point(*p),
        Value::Vector { start, d } => format!(
            "{} {} {}, {} {}",
            format_point(*d),
            w.from,
            format_point(*start),
            w.length,
            format_number(d.norm())
        ),
        Value::Segment(a, b) => format!(
            "{} {} {}, {} {}",
            format_point(*a),
            w.to,
            format_point(*b),
            w.length,
            format_number(a.dist(*b))
        ),
        Value::Line { p, d } => line_equation(*p, *d),
        Value::Ray { p, d } => format!(
            "{} {} {} {}",
            w.from,
            format_point(*p),
            w.through,
            format_point(*p + *d)
        ),
        Value::Circle { centre, radius } => format!(
            "{} {}, {} {}",
            w.centre,
            format_point(*centre),
            w.radius,
            format_number(*radius)
        ),
        Value::Polygon(vertices) => {
            let points: Vec<String> = vertices.iter().map(|v| format_point(*v)).collect();
            let area = crate::geom::twice_area(vertices).abs() / 2.0;
            format!("{}, {} {}", points.join(", "), w.area, format_number(area))
        }
        Value::Angle {
            vertex, degrees, ..
        } => format!(
            "{}° {} {}",
            format_number(*degrees),
            w.at,
            format_point(*vertex)
        ),
        Value::Function(f) => format!("{}({}) = {}", f.name, f.param, f.body_text),
    }
}

/// `a x + b y = c`: whole coefficients when small ones exist (`2x - y = 0`, `3x + 4y = 12`),
/// else the largest is 1; the first non-zero one positive.
fn line_equation(p: Pt, d: Pt) -> String {
    let (a, b) = (-d.y, d.x);
    let smallest = [a.abs(), b.abs()]
        .into_iter()
        .filter(|k| *k > 1e-12 * a.abs().max(b.abs()))
        .fold(f64::MAX, f64::min);
    let (a, b) = (a / smallest, b / smallest);
    let whole = |k: f64| (k - k.round()).abs() < 1e-9;
    let (mut a, mut b) = match (1..=12)
        .map(f64::from)
        .find(|m| whole(a * m) && whole(b * m))
    {
        Some(m) => ((a * m).round(), (b * m).round()),
        None => {
            let largest = a.abs().max(b.abs());
            (a / largest, b / largest)
        }
    };
    if a < 0.0 || (a == 0.0 && b < 0.0) {
        a = -a;
        b = -b;
    }
    let c = a * p.x + b * p.y;
    let term = |k: f64, var: &str| -> Option<String> {
        if format_number(k) == "0" {
            return None;
        }
        Some(match format_number(k).as_str() {
            "1" => var.to_string(),
            "-1" => format!("-{var}"),
            k => format!("{k}{var}"),
        })
    };
    let lhs = match (term(a, "x"), term(b, "y")) {
        (Some(x), Some(y)) if y.starts_with('-') => format!("{x} - {}", &y[1..]),
        (Some(x), Some(y)) => format!("{x} + {y}"),
        (Some(x), None) => x,
        (None, Some(y)) => y,
        (None, None) => "0".into(),
    };
    format!("{lhs} = {}", format_number(c))
}

/// `| name | type | definition | value |`, one row per object, in `lang`.
pub fn object_table(construction: &Construction, lang: Lang) -> String {
    let mut out = format!("{}\n|---|---|---|---|\n", words(lang).header);
    for object in &construction.objects {
        out.push_str(&row(object, lang));
    }
    out
}

fn row(object: &Object, lang: Lang) -> String {
    let name = match &object.style.caption {
        Some(caption) => format!("{} (\"{caption}\")", object.name),
        None => object.name.clone(),
    };
    let kind = match lang {
        Lang::En => object.value.kind(),
        Lang::Zh => crate::zh::kind_zh(object.value.kind()),
    };
    format!(
        "| {} | {kind} | {} | {} |\n",
        cell(&name),
        cell(&object.definition),
        cell(&describe(&object.value, lang))
    )
}

/// Text safe in a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\").replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_never_negative_zero() {
        assert_eq!(format_number(2.0), "2");
        assert_eq!(format_number(-0.5), "-0.5");
        assert_eq!(format_number(2f64.sqrt()), "1.4142");
        assert_eq!(format_number(-0.00001), "0");
        assert_eq!(format_number(1234.5), "1234.5");
    }

    #[test]
    fn lines_read_as_equations() {
        assert_eq!(line_equation(Pt::new(0.0, 2.0), Pt::new(3.0, 0.0)), "y = 2");
        assert_eq!(
            line_equation(Pt::new(1.0, 0.0), Pt::new(0.0, -1.0)),
            "x = 1"
        );
        assert_eq!(
            line_equation(Pt::new(0.0, 0.0), Pt::new(1.0, 1.0)),
            "x - y = 0"
        );
        assert_eq!(
            line_equation(Pt::new(0.0, 1.0), Pt::new(1.0, -2.0)),
            "2x + y = 1"
        );
        assert_eq!(
            line_equation(Pt::new(0.0, 3.0), Pt::new(4.0, -3.0)),
            "3x + 4y = 12"
        );
        assert_eq!(
            line_equation(Pt::new(0.0, 0.0), Pt::new(1.0, 2f64.sqrt())),
            "x - 0.7071y = 0"
        );
    }
}
