//! The parser and the evaluator against a table of commands: valid ones and the objects they
//! make, invalid ones and the error at their line and column, degenerate constructions and
//! their named errors.

use deepsolve_geometry::names::COMMANDS;
use deepsolve_geometry::{ErrorKind, Lang, PALETTE, check, describe};

const TRIANGLE: &str = "A = (0, 0)\nB = (4, 0)\nC = (0, 3)";

/// `(script, object, what the table says it is)`.
const VALID: &[(&str, &str, &str)] = &[
    ("A = (1, 2)", "A", "(1, 2)"),
    ("A: (1.5, -.5)", "A", "(1.5, -0.5)"),
    ("(3, -4)", "A", "(3, -4)"),
    ("A = (0, 0)\n(1, 1)", "B", "(1, 1)"),
    ("r = 3\nA = (r, 2r)", "A", "(3, 6)"),
    ("A = (2 * 3 - 1, 2^3 / 4)", "A", "(5, 2)"),
    ("A = (-2^2, (1 + 2)(3))", "A", "(-4, 9)"),
    ("A = (sqrt(2), cos(pi))", "A", "(1.4142, -1)"),
    ("A = (cos(60°), sin(30°))", "A", "(0.5, 0.5)"),
    ("A = (1, 2)\nB = A + (3, 4)", "B", "(4, 6)"),
    ("A = (1, 2)\nB = 2A", "B", "(2, 4)"),
    ("A = (1, 2)\nk = x(A) + y(A)", "k", "3"),
    (
        "A = (1, 1)\nv = Vector((3, 4))\nB = Point(A, v)",
        "B",
        "(4, 5)",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\ns = Segment(A, B)",
        "s",
        "(0, 0) to (4, 0), length 4",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\nSegment(A, B)",
        "segment1",
        "(0, 0) to (4, 0), length 4",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\ns = Segment(A, B)\nM = Point(s)",
        "M",
        "(2, 0)",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\ns = Segment(A, B)\nP = Point(s, 0.25)",
        "P",
        "(1, 0)",
    ),
    ("A = (0, 1)\nB = (2, 1)\ng = Line(A, B)", "g", "y = 1"),
    ("A = (0, 0)\nB = (1, 2)\ng = Line(A, B)", "g", "2x - y = 0"),
    (
        "A = (0, 0)\nB = (1, 1)\nh = Ray(A, B)",
        "h",
        "from (0, 0) through (1, 1)",
    ),
    (
        "A = (1, 1)\nB = (4, 5)\nu = Vector(A, B)",
        "u",
        "(3, 4) from (1, 1), length 5",
    ),
    (
        "A = (1, 1)\nc = Circle(A, 2)",
        "c",
        "centre (1, 1), radius 2",
    ),
    (
        "A = (0, 0)\nB = (3, 4)\nc = Circle(A, B)",
        "c",
        "centre (0, 0), radius 5",
    ),
    (
        "A = (0, 0)\nB = (3, 4)\nc = Circle(A, Distance(A, B))",
        "c",
        "centre (0, 0), radius 5",
    ),
    (
        "A = (0, 0)\nB = (3, 4)\ns = Segment(A, B)\nc = Circle(A, s)",
        "c",
        "centre (0, 0), radius 5",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\nC = (0, 3)\nc = Circle(A, B, C)",
        "c",
        "centre (2, 1.5), radius 2.5",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\nC = (0, 3)\nt = Polygon(A, B, C)",
        "t",
        "(0, 0), (4, 0), (0, 3), area 6",
    ),
    ("A = (0, 0)\nB = (4, 2)\nM = Midpoint(A, B)", "M", "(2, 1)"),
    (
        "A = (0, 0)\nB = (4, 2)\ns = Segment(A, B)\nM = Midpoint(s)",
        "M",
        "(2, 1)",
    ),
    (
        "A = (0, 0)\nB = (4, 4)\nC = (0, 4)\nD = (4, 0)\nP = Intersect(Line(A, B), Line(C, D))",
        "P",
        "(2, 2)",
    ),
    (
        "A = (0, 0)\nB = (4, 4)\nC = (0, 4)\nD = (4, 0)\nP = Intersect(Segment(A, B), Segment(C, D))",
        "P",
        "(2, 2)",
    ),
    (
        "O = (0, 0)\nc = Circle(O, 5)\ng = Line((-10, 3), (10, 3))\nP = Intersect(g, c, 2)",
        "P",
        "(4, 3)",
    ),
    (
        "O = (0, 0)\nc = Circle(O, 5)\ng = Line((-10, 3), (10, 3))\nP = Intersect(c, g, 1)",
        "P",
        "(-4, 3)",
    ),
    (
        "O = (0, 0)\nc = Circle(O, 5)\ng = Line((-10, 3), (10, 3))\nIntersect(g, c)",
        "B",
        "(4, 3)",
    ),
    (
        "c = Circle((0, 0), 5)\nd = Circle((8, 0), 5)\nP = Intersect(c, d, 1)\nQ = Intersect(c, d, 2)",
        "Q",
        "(4, -3)",
    ),
    (
        "c = Circle((0, 0), 5)\nd = Circle((8, 0), 5)\nP = Intersect(c, d)",
        "P",
        "(4, 3)",
    ),
    (
        "A = (1, 1)\nB = (0, 0)\nC = (4, 0)\np = PerpendicularLine(A, Line(B, C))",
        "p",
        "x = 1",
    ),
    (
        "A = (1, 1)\nB = (0, 0)\nC = (4, 0)\np = ParallelLine(A, Segment(B, C))",
        "p",
        "y = 1",
    ),
    (
        "A = (1, 1)\nB = (0, 0)\nC = (4, 0)\nF = Intersect(PerpendicularLine(A, Line(B, C)), Line(B, C))",
        "F",
        "(1, 0)",
    ),
    (
        "A = (0, 2)\nB = (0, 0)\nC = (2, 0)\nb = AngleBisector(A, B, C)",
        "b",
        "x - y = 0",
    ),
    (
        "A = (0, 2)\nB = (0, 0)\nC = (2, 0)\nα = Angle(A, B, C)",
        "α",
        "90° at (0, 0)",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\nC = (0, 3)\nβ = Angle(C, B, A)",
        "β",
        "36.8699° at (4, 0)",
    ),
    (
        "A = (0, 0)\nB = (4, 0)\nC = (0, 3)\nAngle(C, B, A)\nAngle(B, C, A)",
        "β",
        "53.1301° at (0, 3)",
    ),
    (
        "g = Line((0, 0), (1, 0))\nh = Line((0, 0), (1, 1))\nw = Angle(g, h)",
        "w",
        "45° at (0, 0)",
    ),
    ("A = (0, 0)\nB = (3, 4)\nd = Distance(A, B)", "d", "5"),
    (
        "A = (0, 5)\ng = Line((0, 0), (1, 0))\nd = Distance(A, g)",
        "d",
        "5",
    ),
    ("s = Segment((0, 0), (6, 8))\nL = Length(s)", "L", "10"),
    ("f(x) = x^2 - 2x + 1", "f", "f(x) = x^2 - 2 * x + 1"),
    ("a = 2\nf(x) = a sin(x) + e", "f", "f(x) = a * sin(x) + e"),
    ("f(x) = x^2\ny0 = f(3)", "y0", "9"),
    ("f(x) = x^2\ng(t) = f(t) + 1\nk = g(2)", "k", "5"),
    ("T = Text(\"Find ∠C\")", "T", "\"Find ∠C\""),
    (
        "A = (1, 1)\nT = Text(\"here\", A)",
        "T",
        "\"here\" at (1, 1)",
    ),
    ("A = (1, 1)\nSetCaption(A, \"apex\")", "A", "(1, 1)"),
];

#[test]
fn valid_commands_make_their_objects() {
    for (script, name, expected) in VALID {
        let checked = check(script);
        assert!(checked.errors.is_empty(), "{script}: {:?}", checked.errors);
        let object = checked
            .construction
            .get(name)
            .unwrap_or_else(|| panic!("{script}: no {name} in {:?}", names(&checked)));
        assert_eq!(describe(&object.value, Lang::En), *expected, "{script}");
    }
}

fn names(checked: &deepsolve_geometry::Checked) -> Vec<String> {
    checked
        .construction
        .objects
        .iter()
        .map(|o| o.name.clone())
        .collect()
}

#[test]
fn style_commands_change_the_object_they_name() {
    let checked = check(
        "A = (1, 1)\nc = Circle(A, 1)\nSetCaption(A, \"apex\")\nShowLabel(c, true)\nSetColor(c, \"Red\")\nSetColor(A, \"#00FF7f\")\nShowLabel(A, false)",
    );
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let a = checked.construction.get("A").unwrap();
    assert_eq!(a.style.caption.as_deref(), Some("apex"));
    assert_eq!(a.style.color.unwrap().to_string(), "#00ff7f");
    assert!(!a.label_shown());
    let c = checked.construction.get("c").unwrap();
    assert!(c.label_shown());
    assert_eq!(c.style.color.unwrap().to_string(), "#d62828");
}

/// `(script, line, column, what the message says)`.
const INVALID: &[(&str, usize, usize, &str)] = &[
    (
        "Segmnt(A, B)",
        1,
        1,
        "unknown command 'Segmnt'; did you mean 'Segment'?",
    ),
    (
        "A = (0, 0)\nc = circle(A, 2)",
        2,
        5,
        "did you mean 'Circle'?",
    ),
    (
        "A = (0, 0)\nP = Intersection(A, A)",
        2,
        5,
        "did you mean 'Intersect'?",
    ),
    (
        "m = PerpendicularBisector(A, B)",
        1,
        5,
        "not supported; build it as PerpendicularLine(Midpoint(A, B), Line(A, B))",
    ),
    (
        "Frobnicate(A)",
        1,
        1,
        "unknown command 'Frobnicate' (supported: Point, Segment",
    ),
    (
        "A = (1, 2",
        1,
        10,
        "the command ends where ')' after a point's two coordinates was expected",
    ),
    ("A = (1 2)", 1, 8, "expected ')' or ',', found the number 2"),
    (
        "A = (1, 2))",
        1,
        11,
        "expected the end of the command, found ')'",
    ),
    ("Circle(A,, 3)", 1, 10, "expected an expression, found ','"),
    (
        "A = 1 + ",
        1,
        8,
        "the command ends where an expression was expected",
    ),
    ("A = (1, 2) # corner", 1, 12, "unexpected character '#'"),
    ("Text(\"open", 1, 6, "a text is missing its closing '\"'"),
    ("Segment = (1, 2)", 1, 1, "'Segment' is reserved"),
    ("x = 3", 1, 1, "'x' is reserved"),
    (
        "\n\nA = (1, 2)\nB = (3, ",
        4,
        8,
        "the command ends where an expression was expected",
    ),
];

#[test]
fn invalid_commands_are_named_with_line_and_column() {
    for (script, line, column, message) in INVALID {
        let checked = check(script);
        let error = checked
            .errors
            .iter()
            .find(|e| !e.is_evaluation())
            .unwrap_or_else(|| panic!("{script}: no reading error in {:?}", checked.errors));
        assert_eq!(
            (error.line, error.column),
            (*line, *column),
            "{script}: {error}"
        );
        assert!(error.to_string().contains(message), "{script}: {error}");
        let text = script.lines().nth(line - 1).unwrap().trim();
        assert_eq!(error.command, text);
        assert!(
            error
                .to_string()
                .starts_with(&format!("line {line}, column {column} (`{text}`): ")),
            "{error}"
        );
    }
}

#[test]
fn a_bad_line_does_not_stop_the_others() {
    let checked = check("A = (0, 0)\nB = (4, 0\nC = (0, 3)\ns = Segment(A, C)");
    assert_eq!(checked.failed_lines(), vec![2]);
    assert_eq!(checked.construction.objects.len(), 3);
    let valid: Vec<usize> = checked.valid_commands().iter().map(|c| c.line).collect();
    assert_eq!(valid, vec![1, 3, 4]);
}

/// `(script, line, column, the error)`.
fn degenerate() -> Vec<(&'static str, usize, usize, ErrorKind)> {
    vec![
        (
            "g = Line((0, 0), (1, 0))\nh = Line((0, 1), (1, 1))\nP = Intersect(g, h)",
            3,
            5,
            ErrorKind::ParallelLines,
        ),
        (
            "g = Line((0, 0), (1, 0))\nh = Line((2, 0), (5, 0))\nP = Intersect(g, h)",
            3,
            5,
            ErrorKind::SameLine,
        ),
        (
            "P = Intersect(Segment((0, 0), (1, 1)), Segment((3, 0), (2, 1)))",
            1,
            5,
            ErrorKind::NoIntersection,
        ),
        (
            "P = Intersect(Circle((0, 0), 1), Circle((5, 0), 1))",
            1,
            5,
            ErrorKind::NoIntersection,
        ),
        (
            "P = Intersect(Circle((0, 0), 1), Circle((0, 0), 1))",
            1,
            5,
            ErrorKind::SameCircle,
        ),
        (
            "P = Intersect(Circle((0, 0), 5), Line((-9, 3), (9, 3)), 3)",
            1,
            5,
            ErrorKind::IntersectionIndex { index: 3, count: 2 },
        ),
        (
            "P = Intersect(Circle((0, 0), 5), Line((-9, 3), (9, 3)), 1.5)",
            1,
            5,
            ErrorKind::BadIndex(1.5),
        ),
        (
            "A = (0, 0)\nB = (1, 1)\nC = (2, 2)\nc = Circle(A, B, C)",
            4,
            5,
            ErrorKind::Collinear,
        ),
        (
            "A = (0, 0)\nc = Circle(A, -2)",
            2,
            5,
            ErrorKind::BadRadius(-2.0),
        ),
        (
            "A = (1, 1)\ns = Segment(A, (1, 1))",
            2,
            5,
            ErrorKind::CoincidentPoints("a segment needs two different points"),
        ),
        (
            "t = Polygon((0, 0), (1, 1), (2, 2))",
            1,
            5,
            ErrorKind::CoincidentPoints(
                "the polygon's vertices are on one line, so it has no area",
            ),
        ),
        (
            "w = Angle(Line((0, 0), (1, 0)), Line((0, 1), (1, 1)))",
            1,
            5,
            ErrorKind::ParallelNoAngle,
        ),
        (
            "A = (0, 0)\nA = (1, 1)",
            2,
            1,
            ErrorKind::Redefined {
                name: "A".into(),
                line: 1,
            },
        ),
        (
            "s = Segment(A, B)\nA = (0, 0)\nB = (1, 0)",
            1,
            13,
            ErrorKind::ForwardReference {
                name: "A".into(),
                line: 2,
            },
        ),
        (
            "A = (0, 0)\ns = Segment(A, Q)",
            2,
            16,
            ErrorKind::UnknownName {
                name: "Q".into(),
                suggestion: None,
            },
        ),
        (
            "Apex = (0, 0)\ns = Circle(apex, 2)",
            2,
            12,
            ErrorKind::UnknownName {
                name: "apex".into(),
                suggestion: Some("Apex".into()),
            },
        ),
        (
            "g = Line((0, 0), (1, 0))\nh = Line((0, 1), (1, 1))\nP = Intersect(g, h)\ns = Segment(P, (1, 1))",
            4,
            13,
            ErrorKind::DependsOnFailed {
                name: "P".into(),
                line: 3,
            },
        ),
        (
            "A = (0, 0)\ns = Segment(A, (1, 0))\nc = Circle(A, s, 2)",
            3,
            5,
            ErrorKind::WrongArguments {
                command: "Circle",
                expects: "(point, number), (point, point), (point, segment) or (point, point, point)",
                got: "point, segment, number".into(),
            },
        ),
        (
            "A = (0, 0)\nc = Circle(2, A)",
            2,
            5,
            ErrorKind::WrongArguments {
                command: "Circle",
                expects: "(point, number), (point, point), (point, segment) or (point, point, point)",
                got: "number, point".into(),
            },
        ),
        (
            "A = (0, 0)\nB = A + 2",
            2,
            5,
            ErrorKind::WrongOperands {
                op: "add",
                lhs: "a point",
                rhs: "a number",
            },
        ),
        ("k = 1 / 0", 1, 5, ErrorKind::NotFinite),
        ("k = sqrt(-1)", 1, 5, ErrorKind::NotFinite),
        ("A = (2000000, 0)", 1, 5, ErrorKind::OutOfRange(1.0e6)),
        (
            "A = (0, 0)\nSetColor(A, \"chartreuse\")",
            2,
            13,
            ErrorKind::BadColor("chartreuse".into()),
        ),
        (
            "A = (0, 0)\nSetColor(A, 1, 0, 0)",
            2,
            1,
            ErrorKind::WrongArguments {
                command: "SetColor",
                expects: "(object, colour name or \"#rrggbb\")",
                got: "point, number, number, number".into(),
            },
        ),
        (
            "A = (0, 0)\nB = SetCaption(A, \"x\")",
            2,
            5,
            ErrorKind::NotAssignable("SetCaption"),
        ),
        (
            "SetCaption((1, 1), \"x\")",
            1,
            12,
            ErrorKind::NotAnObjectName("SetCaption"),
        ),
        (
            "k = y + 1",
            1,
            5,
            ErrorKind::VariableOutsideFunction("y".into()),
        ),
        (
            "r = 2\nk = r(3)",
            2,
            5,
            ErrorKind::NotAFunction {
                name: "r".into(),
                kind: "number",
            },
        ),
    ]
}

#[test]
fn degenerate_constructions_are_named_errors() {
    for (script, line, column, kind) in degenerate() {
        let checked = check(script);
        let error = checked
            .errors
            .iter()
            .find(|e| e.line == line)
            .unwrap_or_else(|| panic!("{script}: no error on line {line}: {:?}", checked.errors));
        assert!(error.is_evaluation(), "{script}: {error}");
        assert_eq!(
            (error.line, error.column, &error.kind),
            (line, column, &kind),
            "{script}: {error}"
        );
    }
}

#[test]
fn every_palette_colour_is_named_in_the_colour_error() {
    let message = ErrorKind::BadColor("x".into()).to_string();
    for (name, _) in deepsolve_geometry::PALETTE {
        assert!(message.contains(name) || *name == "grey", "{name}");
    }
}

#[test]
fn the_triangle_fixture_builds() {
    let checked = check(TRIANGLE);
    assert_eq!(names(&checked), vec!["A", "B", "C"]);
}

#[test]
fn functions_too_costly_to_draw_are_refused() {
    let mut script = String::from("f0(x) = x + 1\n");
    for i in 1..20 {
        script.push_str(&format!("f{i}(x) = f{}(x) + f{}(x)\n", i - 1, i - 1));
    }
    let checked = check(&script);
    let error = checked.errors.first().expect("an error");
    assert_eq!(error.kind, ErrorKind::FunctionTooLarge(5_000), "{error}");
    assert!(error.line < 20);
}

#[test]
fn many_costly_functions_are_refused_together() {
    let mut script = String::from("f0(x) = x + 1\n");
    for i in 1..10 {
        script.push_str(&format!("f{i}(x) = f{}(x) + f{}(x)\n", i - 1, i - 1));
    }
    for i in 0..40 {
        script.push_str(&format!("g{i}(x) = f9(x)\n"));
    }
    let checked = check(&script);
    let error = checked.errors.first().expect("an error");
    assert_eq!(error.kind, ErrorKind::FunctionsTooLarge(20_000), "{error}");
    assert!(error.line > 10, "the first functions are kept: {error}");
}

#[test]
fn the_script_is_bounded() {
    let many = "A = (0, 0)\n".to_string() + &"(1, 1)\n".repeat(600);
    let checked = check(&many);
    assert!(
        checked
            .errors
            .iter()
            .any(|e| e.kind == ErrorKind::TooManyCommands(500))
    );
    let deep = format!("k = {}1{}", "(".repeat(200), ")".repeat(200));
    let checked = check(&deep);
    assert_eq!(checked.errors[0].kind, ErrorKind::TooDeep(64));
    let long = format!("T = Text(\"{}\")", "a".repeat(3000));
    assert_eq!(check(&long).errors[0].kind, ErrorKind::LineTooLong(2000));
}

/// Words of four ASCII letters or more outside quotes that are not a command, a colour or a
/// literal: English prose, which a Chinese message must not have.
fn english_prose(message: &str) -> Vec<String> {
    let mut unquoted = String::new();
    let mut quote: Option<char> = None;
    for c in message.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if matches!(c, '\'' | '"' | '`') => quote = Some(c),
            None => unquoted.push(c),
        }
    }
    let allowed = |w: &str| {
        COMMANDS.iter().any(|c| c.name == w)
            || PALETTE.iter().any(|(name, _)| *name == w)
            || matches!(w, "true" | "false" | "rrggbb")
    };
    unquoted
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 4 && !allowed(w))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_error_reads_in_chinese_too() {
    let mut scripts: Vec<&str> = INVALID.iter().map(|(s, ..)| *s).collect();
    let degenerate = degenerate();
    scripts.extend(degenerate.iter().map(|(s, ..)| *s));
    scripts.extend([
        "A = (1, 2)\nB = A * Segment(A, (2, 2))",
        "f(x) = Circle(x, 1)",
        "k = -Segment((0, 0), (1, 1))",
        "Incircle(A, B, C)",
        "k = (0, 0) * 1 + \"t\"",
    ]);
    let mut seen = 0;
    for script in scripts {
        for error in check(script).errors {
            let zh = error.kind.message(Lang::Zh);
            assert_ne!(zh, error.kind.message(Lang::En));
            let prose = english_prose(&zh);
            assert!(prose.is_empty(), "{script}: {zh} has {prose:?}");
            seen += 1;
        }
    }
    assert!(seen > 40, "{seen}");
}

#[test]
fn the_table_reads_in_chinese_too() {
    let checked = check(
        "A = (0, 0)\nB = (4, 0)\nC = (0, 3)\nt = Polygon(A, B, C)\nc = Circle(A, B, C)\nh = Ray(A, C)\nv = Vector(A, B)\ns = Segment(A, B)\nβ = Angle(C, B, A)\nT = Text(\"x\", A)",
    );
    let zh = deepsolve_geometry::object_table(&checked.construction, Lang::Zh);
    assert!(zh.starts_with("| 名称 | 类型 | 定义 | 值 |\n"), "{zh}");
    for row in [
        "| c | 圆 | Circle(A, B, C) | 圆心 (2, 1.5), 半径 2.5 |",
        "| β | 角 | Angle(C, B, A) | 36.8699° 位于 (4, 0) |",
        "| t | 多边形 | Polygon(A, B, C) | (0, 0), (4, 0), (0, 3), 面积 6 |",
    ] {
        assert!(zh.contains(row), "{row}\n{zh}");
    }
    let prose = english_prose(&zh.replace("Circle", "").replace("Polygon", ""));
    let prose: Vec<String> = prose
        .into_iter()
        .filter(|w| !COMMANDS.iter().any(|c| c.name == w))
        .collect();
    assert!(prose.is_empty(), "{prose:?}\n{zh}");
}
