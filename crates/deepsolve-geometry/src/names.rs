//! The commands and functions the subset knows, what each accepts (for error messages), and
//! the nearest known name for a misspelt one.

/// A command of the subset, with the argument lists it accepts as an error message states
/// them, in English and in Chinese.
#[derive(Debug, Clone, Copy)]
pub struct CommandInfo {
    pub name: &'static str,
    pub expects: &'static str,
    pub expects_zh: &'static str,
}

const fn command(
    name: &'static str,
    expects: &'static str,
    expects_zh: &'static str,
) -> CommandInfo {
    CommandInfo {
        name,
        expects,
        expects_zh,
    }
}

/// Every command, as GeoGebra spells it.
pub const COMMANDS: &[CommandInfo] = &[
    command(
        "Point",
        "(segment, line, ray or circle), (that object, number) or (point, vector)",
        "(线段、直线、射线或圆)、(该对象, 数) 或 (点, 向量)",
    ),
    command("Segment", "(point, point)", "(点, 点)"),
    command(
        "Line",
        "(point, point) or (point, parallel line)",
        "(点, 点) 或 (点, 平行直线)",
    ),
    command(
        "Ray",
        "(point, point) or (point, vector)",
        "(点, 点) 或 (点, 向量)",
    ),
    command("Vector", "(point, point) or (point)", "(点, 点) 或 (点)"),
    command(
        "Circle",
        "(point, number), (point, point), (point, segment) or (point, point, point)",
        "(点, 数)、(点, 点)、(点, 线段) 或 (点, 点, 点)",
    ),
    command("Polygon", "(point, point, point, …)", "(点, 点, 点, …)"),
    command(
        "Midpoint",
        "(point, point) or (segment)",
        "(点, 点) 或 (线段)",
    ),
    command(
        "Intersect",
        "(object, object) or (object, object, index), each object a line, segment, ray or circle",
        "(对象, 对象) 或 (对象, 对象, 序号)，对象为直线、线段、射线或圆",
    ),
    command("PerpendicularLine", "(point, line)", "(点, 直线)"),
    command("ParallelLine", "(point, line)", "(点, 直线)"),
    command(
        "AngleBisector",
        "(point, point, point) or (line, line)",
        "(点, 点, 点) 或 (直线, 直线)",
    ),
    command(
        "Angle",
        "(point, point, point) or (line, line)",
        "(点, 点, 点) 或 (直线, 直线)",
    ),
    command(
        "Distance",
        "(point, point) or (point, line)",
        "(点, 点) 或 (点, 直线)",
    ),
    command("Length", "(segment) or (vector)", "(线段) 或 (向量)"),
    command("Text", "(text) or (text, point)", "(文本) 或 (文本, 点)"),
    command("SetCaption", "(object, text)", "(对象, 文本)"),
    command(
        "ShowLabel",
        "(object, true or false)",
        "(对象, true 或 false)",
    ),
    command(
        "SetColor",
        "(object, colour name or \"#rrggbb\")",
        "(对象, 颜色名或 \"#rrggbb\")",
    ),
];

/// Commands that change an object instead of making one.
pub const STYLE_COMMANDS: &[&str] = &["SetCaption", "ShowLabel", "SetColor"];

/// Maths functions of one number. `x(P)` and `y(P)` read a point's coordinates.
pub const FUNCTIONS: &[&str] = &[
    "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "abs", "exp", "ln", "log", "x", "y",
];

/// Constants, by name.
pub const CONSTANTS: &[(&str, f64)] = &[("pi", std::f64::consts::PI), ("π", std::f64::consts::PI)];

/// Names no object may take: the commands, the functions, the constants, the coordinates
/// and the literals.
pub fn is_reserved(name: &str) -> bool {
    is_command(name)
        || FUNCTIONS.contains(&name)
        || CONSTANTS.iter().any(|(c, _)| *c == name)
        || matches!(name, "true" | "false")
}

pub fn is_command(name: &str) -> bool {
    COMMANDS.iter().any(|c| c.name == name)
}

pub fn command_info(name: &str) -> Option<&'static CommandInfo> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// GeoGebra commands outside the subset that models reach for, and how to build them here.
const ALTERNATIVES: &[(&str, &str)] = &[
    (
        "PerpendicularBisector",
        "PerpendicularLine(Midpoint(A, B), Line(A, B))",
    ),
    ("Triangle", "Polygon(A, B, C)"),
    (
        "Incircle",
        "I = Intersect(AngleBisector(B, A, C), AngleBisector(A, B, C)); Circle(I, Distance(I, Line(A, B)))",
    ),
    ("Circumcircle", "Circle(A, B, C)"),
];

/// How to build `name` with the subset, when it is a GeoGebra command the subset lacks.
pub fn alternative(name: &str) -> Option<&'static str> {
    ALTERNATIVES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, how)| *how)
}

/// The known name closest to `name`, when one is close: the same letters in another case, a
/// few edits away, or one name a prefix of the other (`Intersection` → `Intersect`).
pub fn nearest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for candidate in known {
        if candidate == name {
            continue;
        }
        let other = candidate.to_lowercase();
        let distance = edit_distance(&lower, &other);
        let shorter = lower.chars().count().min(other.chars().count());
        // One-letter names are a step from many others: only a change of case counts there.
        let close = distance == 0
            || (shorter >= 3 && distance <= (shorter / 4).max(1))
            || (shorter >= 5 && (lower.starts_with(&other) || other.starts_with(&lower)));
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// Every command and function name, for suggestions.
pub fn callables() -> impl Iterator<Item = &'static str> {
    COMMANDS
        .iter()
        .map(|c| c.name)
        .chain(FUNCTIONS.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_command() {
        let near = |n: &str| nearest(n, callables());
        assert_eq!(near("Segmnt"), Some("Segment"));
        assert_eq!(near("segment"), Some("Segment"));
        assert_eq!(near("Cirle"), Some("Circle"));
        assert_eq!(near("Intersection"), Some("Intersect"));
        assert_eq!(near("Perpendicular"), Some("PerpendicularLine"));
        assert_eq!(near("MidPoint"), Some("Midpoint"));
        assert_eq!(near("Sqrt"), Some("sqrt"));
        assert_eq!(near("Zzzzzz"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
