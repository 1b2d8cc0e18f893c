//! Properties: reading never panics whatever the text; what it reads prints back to text
//! that reads as the same tree; a constructed triangle's points satisfy the geometry; any
//! script that evaluates renders to a safe SVG.

use deepsolve_geometry::names::{COMMANDS, FUNCTIONS};
use deepsolve_geometry::{
    BinaryOp, Expr, ExprKind, Pt, RenderOptions, Span, Statement, UnaryOp, check, parse_script,
    render_svg,
};
use proptest::prelude::*;

use crate::svg::assert_safe;

fn e(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        (0u32..100_000).prop_map(|n| e(ExprKind::Number(f64::from(n) / 100.0))),
        prop::sample::select(vec!["A", "B", "c", "r", "α", "P_1", "A'", "x", "pi", "e"])
            .prop_map(|n| e(ExprKind::Name(n.into()))),
        "[^\n\r]{0,12}".prop_map(|t| e(ExprKind::Text(t))),
        any::<bool>().prop_map(|b| e(ExprKind::Bool(b))),
    ]
}

fn callee() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = COMMANDS
        .iter()
        .map(|c| c.name)
        .chain(FUNCTIONS.iter().copied())
        .collect();
    prop::sample::select(names).prop_map(String::from)
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(5, 48, 4, |inner| {
        let op = prop::sample::select(vec![
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Pow,
        ]);
        prop_oneof![
            (op, inner.clone(), inner.clone()).prop_map(|(op, l, r)| e(ExprKind::Binary {
                op,
                lhs: Box::new(l),
                rhs: Box::new(r)
            })),
            (any::<bool>(), inner.clone()).prop_map(|(neg, x)| e(ExprKind::Unary {
                op: if neg { UnaryOp::Neg } else { UnaryOp::Plus },
                operand: Box::new(x)
            })),
            (inner.clone(), inner.clone())
                .prop_map(|(x, y)| e(ExprKind::Point(Box::new(x), Box::new(y)))),
            (callee(), prop::collection::vec(inner.clone(), 0..4))
                .prop_map(|(name, args)| e(ExprKind::Call { name, args })),
            inner.prop_map(|x| e(ExprKind::Degrees(Box::new(x)))),
        ]
    })
}

fn statement() -> impl Strategy<Value = Statement> {
    let name = prop::sample::select(vec!["A", "B", "c", "g", "α", "P_1", "A'"]);
    prop_oneof![
        (name.clone(), expr()).prop_map(|(n, expr)| Statement::Assign {
            name: n.into(),
            expr
        }),
        (name, prop::sample::select(vec!["x", "t"]), expr()).prop_map(|(n, p, body)| {
            Statement::Function {
                name: n.into(),
                param: p.into(),
                body,
            }
        }),
        expr().prop_map(Statement::Bare),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn reading_any_text_never_panics(text in any::<String>()) {
        let checked = check(&text);
        for error in &checked.errors {
            prop_assert!(error.line >= 1 && error.column >= 1);
        }
    }

    #[test]
    fn reading_grammar_like_text_never_panics_and_renders_safely(
        text in "[A-Da-c0-9(),=+\\-*/^.:° \"\n]{0,160}|((Segment|Circle|Intersect|Angle|Polygon|Midpoint|f\\(x\\) =|A =|B =)[ (),ABC0-9.\\-]{0,20}\n){0,8}"
    ) {
        let checked = check(&text);
        let svg = render_svg(&checked.construction, &RenderOptions::default());
        assert_safe(&svg);
    }

    #[test]
    fn printing_reads_back_as_the_same_tree(statements in prop::collection::vec(statement(), 1..6)) {
        let script: Vec<String> = statements.iter().map(ToString::to_string).collect();
        let script = script.join("\n");
        let first = parse_script(&script);
        prop_assert!(first.errors.is_empty(), "{script}\n{:?}", first.errors);
        for (read, written) in first.commands.iter().zip(&statements) {
            prop_assert!(read.statement.same_as(written), "{script}\nread {:?}", read.statement);
        }
        let again: Vec<String> = first.commands.iter().map(ToString::to_string).collect();
        let again = again.join("\n");
        prop_assert_eq!(&again, &script);
        let second = parse_script(&again);
        for (a, b) in first.commands.iter().zip(&second.commands) {
            prop_assert!(a.statement.same_as(&b.statement));
        }
    }

    #[test]
    fn a_constructed_triangle_satisfies_the_geometry(
        a in (-50i32..50, -50i32..50),
        b in (-50i32..50, -50i32..50),
        c in (-50i32..50, -50i32..50),
        scale in prop::sample::select(vec![0.1, 1.0, 7.5]),
    ) {
        let p = |(x, y): (i32, i32)| Pt::new(f64::from(x) * scale, f64::from(y) * scale);
        let (pa, pb, pc) = (p(a), p(b), p(c));
        let area = (pb - pa).cross(pc - pa).abs() / 2.0;
        let longest = pa.dist(pb).max(pb.dist(pc)).max(pa.dist(pc));
        // Well-shaped triangles only: a sliver's constructions are ill-conditioned.
        prop_assume!(area > 0.02 * longest * longest);
        let script = format!(
            "A = {}\nB = {}\nC = {}\n{}",
            coords(pa), coords(pb), coords(pc), TRIANGLE_CONSTRUCTION
        );
        let checked = check(&script);
        prop_assert!(checked.errors.is_empty(), "{script}\n{:?}", checked.errors);
        let k = &checked.construction;
        let pt = |n: &str| k.point(n).unwrap();
        let num = |n: &str| k.number(n).unwrap();
        let tol = 1e-7 * longest.max(1.0);
        let o = pt("O");
        // The circumcentre is equidistant from the vertices and is the circle's centre.
        prop_assert!((o.dist(pa) - o.dist(pb)).abs() < tol && (o.dist(pa) - o.dist(pc)).abs() < tol);
        match &k.get("c").unwrap().value {
            deepsolve_geometry::Value::Circle { centre, radius } => {
                prop_assert!(centre.dist(o) < tol && (radius - o.dist(pa)).abs() < tol);
            }
            other => prop_assert!(false, "c is {other:?}"),
        }
        // The angles sum to 180°.
        prop_assert!((num("α") + num("β") + num("γ") - 180.0).abs() < 1e-6);
        // The orthocentre: its lines to the vertices are perpendicular to the opposite sides.
        let h = pt("H");
        prop_assert!((h - pa).dot(pc - pb).abs() < tol * longest);
        prop_assert!((h - pc).dot(pb - pa).abs() < tol * longest);
        // Euler: H − O = 3 (G − O).
        let g = (pa + pb + pc) / 3.0;
        prop_assert!(((h - o) - (g - o) * 3.0).norm() < tol * 10.0);
        // The incentre is as far from each side.
        let (d1, d2, d3) = (num("da"), num("db"), num("dc"));
        prop_assert!((d1 - d2).abs() < tol && (d1 - d3).abs() < tol && d1 > 0.0);
        // The foot of the altitude from A is on BC and AF ⟂ BC.
        let f = pt("F");
        prop_assert!((f - pa).dot(pc - pb).abs() < tol * longest);
        prop_assert!((f - pb).cross(pc - pb).abs() < tol * longest);
        // Midpoints.
        prop_assert!(pt("M").dist((pa + pb) / 2.0) < tol);
        let svg = render_svg(k, &RenderOptions::default());
        assert_safe(&svg);
    }
}

const TRIANGLE_CONSTRUCTION: &str = "M = Midpoint(A, B)
O = Intersect(PerpendicularLine(M, Line(A, B)), PerpendicularLine(Midpoint(B, C), Line(B, C)))
c = Circle(A, B, C)
H = Intersect(PerpendicularLine(A, Line(B, C)), PerpendicularLine(B, Line(A, C)))
I = Intersect(AngleBisector(B, A, C), AngleBisector(A, B, C))
da = Distance(I, Line(B, C))
db = Distance(I, Line(A, C))
dc = Distance(I, Line(A, B))
α = Angle(B, A, C)
β = Angle(A, B, C)
γ = Angle(A, C, B)
F = Intersect(PerpendicularLine(A, Line(B, C)), Line(B, C))
t = Polygon(A, B, C)";

fn coords(p: Pt) -> String {
    format!("({}, {})", p.x, p.y)
}
