//! Evaluating a script: every object's value, computed from its parents in script order.
//!
//! A command that cannot be built is reported (with the column of the argument at fault where
//! there is one) and its name marked as failed, so a command that uses it says so instead of
//! "unknown name". Nothing is drawn from a failed command.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::ast::{BinaryOp, Command, Expr, ExprKind, Span, Statement, UnaryOp};
use crate::error::{ErrorKind, GeoError};
use crate::geom::{self, CircleCrossing, Crossing, Extent, Linear, Pt};
use crate::limits::{MAX_FUNCTION_COST, MAX_TEXT_CHARS, MAX_TOTAL_FUNCTION_COST};
use crate::names::{self, CONSTANTS, STYLE_COMMANDS};
use crate::value::{Color, Construction, Function, MathFn, Num, Object, Style, Value};

/// An error at a column of the command being evaluated.
type EResult<T> = Result<T, (usize, ErrorKind)>;

/// Evaluates `commands` in order.
pub fn evaluate(commands: &[Command]) -> Construction {
    let mut eval = Evaluator::new(commands);
    for command in commands {
        eval.command(command);
    }
    Construction {
        objects: eval.objects,
        errors: eval.errors,
    }
}

struct Evaluator {
    objects: Vec<Object>,
    errors: Vec<GeoError>,
    /// Name → index in `objects`.
    index: HashMap<String, usize>,
    /// Names whose command failed → its line.
    failed: HashMap<String, usize>,
    /// Every name the script assigns → the first line that does.
    defined: HashMap<String, usize>,
    names: AutoNames,
    /// Operations per value of the functions defined so far.
    function_cost: usize,
}

impl Evaluator {
    fn new(commands: &[Command]) -> Self {
        let mut defined = HashMap::new();
        for command in commands {
            if let Some(name) = command.statement.name() {
                defined.entry(name.to_string()).or_insert(command.line);
            }
        }
        let names = AutoNames {
            taken: defined.keys().cloned().collect(),
        };
        Evaluator {
            objects: Vec::new(),
            errors: Vec::new(),
            index: HashMap::new(),
            failed: HashMap::new(),
            defined,
            names,
            function_cost: 0,
        }
    }

    fn command(&mut self, command: &Command) {
        let result = match &command.statement {
            Statement::Assign { name, expr } => self.assign(command, name, expr),
            Statement::Function { name, param, body } => self.function(command, name, param, body),
            Statement::Bare(expr) => self.bare(command, expr),
        };
        if let Err((column, kind)) = result {
            if let Some(name) = command.statement.name() {
                self.failed.entry(name.to_string()).or_insert(command.line);
            }
            self.errors.push(GeoError {
                line: command.line,
                column,
                command: command.text.clone(),
                kind,
            });
        }
    }

    fn check_new_name(&self, command: &Command, name: &str) -> EResult<()> {
        match self.defined.get(name) {
            Some(&first) if first != command.line => Err((
                1,
                ErrorKind::Redefined {
                    name: name.to_string(),
                    line: first,
                },
            )),
            _ => Ok(()),
        }
    }

    fn assign(&mut self, command: &Command, name: &str, expr: &Expr) -> EResult<()> {
        self.check_new_name(command, name)?;
        if let ExprKind::Call { name: callee, .. } = &expr.kind
            && let Some(style) = STYLE_COMMANDS.iter().find(|s| **s == callee)
        {
            return Err((expr.span.start, ErrorKind::NotAssignable(style)));
        }
        let value = self.value(expr)?;
        self.add(
            command,
            name.to_string(),
            expr.to_string(),
            value,
            false,
            expr.span,
        )
    }

    fn function(&mut self, command: &Command, name: &str, param: &str, body: &Expr) -> EResult<()> {
        self.check_new_name(command, name)?;
        let compiled = self.compile(body, param)?;
        let cost = compiled.cost();
        if cost > MAX_FUNCTION_COST {
            return Err((
                body.span.start,
                ErrorKind::FunctionTooLarge(MAX_FUNCTION_COST),
            ));
        }
        if self.function_cost + cost > MAX_TOTAL_FUNCTION_COST {
            return Err((
                body.span.start,
                ErrorKind::FunctionsTooLarge(MAX_TOTAL_FUNCTION_COST),
            ));
        }
        self.function_cost += cost;
        let function = Function {
            name: name.to_string(),
            param: param.to_string(),
            body_text: body.to_string(),
            body: compiled,
            cost,
        };
        let definition = format!("{name}({param}) = {body}");
        let value = Value::Function(Arc::new(function));
        self.add(
            command,
            name.to_string(),
            definition,
            value,
            false,
            body.span,
        )
    }

    fn bare(&mut self, command: &Command, expr: &Expr) -> EResult<()> {
        if let ExprKind::Call { name, args } = &expr.kind {
            if let Some(style) = STYLE_COMMANDS.iter().copied().find(|s| s == name) {
                return self.style(style, args, expr.span);
            }
            if name == "Intersect" && args.len() == 2 {
                return self.all_intersections(command, expr, args);
            }
        }
        let value = self.value(expr)?;
        let name = self.names.next(&value);
        self.add(command, name, expr.to_string(), value, true, expr.span)
    }

    fn add(
        &mut self,
        command: &Command,
        name: String,
        definition: String,
        value: Value,
        auto_named: bool,
        span: Span,
    ) -> EResult<()> {
        value.check_bounds().map_err(|kind| (span.start, kind))?;
        self.index.insert(name.clone(), self.objects.len());
        self.objects.push(Object {
            name,
            line: command.line,
            definition,
            value,
            style: Style::default(),
            auto_named,
        });
        Ok(())
    }

    /// A bare `Intersect(a, b)`: every intersection point, each an object.
    fn all_intersections(&mut self, command: &Command, expr: &Expr, args: &[Expr]) -> EResult<()> {
        let values = self.values(args)?;
        let points = intersections(&values[0], &values[1], expr.span.start)?;
        let many = points.len() > 1;
        for (i, p) in points.into_iter().enumerate() {
            let value = Value::Point(p);
            let name = self.names.next(&value);
            let definition = if many {
                format!("{expr}, point {}", i + 1)
            } else {
                expr.to_string()
            };
            self.add(command, name, definition, value, true, expr.span)?;
        }
        Ok(())
    }

    /// `SetCaption`, `ShowLabel`, `SetColor`: change an object, make none.
    fn style(&mut self, command: &'static str, args: &[Expr], span: Span) -> EResult<()> {
        let wrong = |got: String| {
            let expects = names::command_info(command).map_or("", |c| c.expects);
            (
                span.start,
                ErrorKind::WrongArguments {
                    command,
                    expects,
                    got,
                },
            )
        };
        let [target, setting] = args else {
            let values = self.values(args)?;
            return Err(wrong(kinds(&values)));
        };
        let ExprKind::Name(name) = &target.kind else {
            return Err((target.span.start, ErrorKind::NotAnObjectName(command)));
        };
        let at = self.resolve(name, target.span)?;
        let value = self.value(setting)?;
        let mut style = self.objects[at].style.clone();
        match (command, value) {
            ("SetCaption", Value::Text { text, .. }) => style.caption = Some(text),
            ("ShowLabel", Value::Bool(show)) => style.show_label = Some(show),
            ("SetColor", Value::Text { text, .. }) => {
                let color = Color::parse(&text)
                    .ok_or((setting.span.start, ErrorKind::BadColor(text.clone())))?;
                style.color = Some(color);
            }
            (_, value) => {
                let got = format!("{}, {}", self.objects[at].value.kind(), value.kind());
                return Err(wrong(got));
            }
        }
        self.objects[at].style = style;
        Ok(())
    }

    /// The index of the object `name`, or why there is none.
    fn resolve(&self, name: &str, span: Span) -> EResult<usize> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        let kind = if let Some(&line) = self.failed.get(name) {
            ErrorKind::DependsOnFailed {
                name: name.to_string(),
                line,
            }
        } else if matches!(name, "x" | "y") {
            ErrorKind::VariableOutsideFunction(name.to_string())
        } else if let Some(&line) = self.defined.get(name) {
            ErrorKind::ForwardReference {
                name: name.to_string(),
                line,
            }
        } else {
            let known = self.objects.iter().map(|o| o.name.as_str());
            ErrorKind::UnknownName {
                name: name.to_string(),
                suggestion: names::nearest(name, known).map(str::to_string),
            }
        };
        Err((span.start, kind))
    }

    fn values(&self, args: &[Expr]) -> EResult<Vec<Value>> {
        args.iter().map(|a| self.value(a)).collect()
    }

    fn value(&self, expr: &Expr) -> EResult<Value> {
        let at = expr.span.start;
        let value = match &expr.kind {
            ExprKind::Number(n) => Value::Number(*n),
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::Text(t) => Value::Text {
                text: checked_text(t, at)?,
                at: None,
            },
            ExprKind::Name(name) => self.name_value(name, expr.span)?,
            ExprKind::Point(x, y) => {
                let (x, y) = (self.number(x)?, self.number(y)?);
                Value::Point(Pt::new(x, y))
            }
            ExprKind::Call { name, args } => self.call(name, args, expr.span)?,
            ExprKind::Unary { op, operand } => unary(*op, self.value(operand)?, at)?,
            ExprKind::Binary { op, lhs, rhs } => {
                binary(*op, self.value(lhs)?, self.value(rhs)?, at)?
            }
            ExprKind::Degrees(inner) => Value::Number(self.number(inner)?.to_radians()),
        };
        if let Value::Number(n) = value
            && !n.is_finite()
        {
            return Err((at, ErrorKind::NotFinite));
        }
        Ok(value)
    }

    fn number(&self, expr: &Expr) -> EResult<f64> {
        let value = self.value(expr)?;
        value.as_number().ok_or((
            expr.span.start,
            ErrorKind::WrongType {
                expected: "a number",
                got: value.kind_with_article(),
            },
        ))
    }

    fn name_value(&self, name: &str, span: Span) -> EResult<Value> {
        if let Some((_, c)) = CONSTANTS.iter().find(|(n, _)| *n == name) {
            return Ok(Value::Number(*c));
        }
        if name == "e" && !self.index.contains_key(name) && !self.defined.contains_key(name) {
            return Ok(Value::Number(std::f64::consts::E));
        }
        let i = self.resolve(name, span)?;
        Ok(self.objects[i].value.clone())
    }

    fn call(&self, name: &str, args: &[Expr], span: Span) -> EResult<Value> {
        let at = span.start;
        if let Some(f) = MathFn::by_name(name) {
            let [arg] = args else {
                return Err((at, arity(name, args.len())));
            };
            return Ok(Value::Number(f.apply(self.number(arg)?)));
        }
        if matches!(name, "x" | "y") {
            let [arg] = args else {
                return Err((at, arity(name, args.len())));
            };
            let p = match self.value(arg)? {
                Value::Point(p) | Value::Vector { d: p, .. } => p,
                other => {
                    return Err((
                        arg.span.start,
                        ErrorKind::WrongType {
                            expected: "a point or a vector",
                            got: other.kind_with_article(),
                        },
                    ));
                }
            };
            return Ok(Value::Number(if name == "x" { p.x } else { p.y }));
        }
        if let Some(info) = names::command_info(name) {
            let values = self.values(args)?;
            return command(info.name, info.expects, &values, at);
        }
        // A function of the script.
        let i = self.resolve(name, span)?;
        let Value::Function(function) = &self.objects[i].value else {
            return Err((
                at,
                ErrorKind::NotAFunction {
                    name: name.to_string(),
                    kind: self.objects[i].value.kind(),
                },
            ));
        };
        let [arg] = args else {
            return Err((at, arity(name, args.len())));
        };
        Ok(Value::Number(function.value(self.number(arg)?)))
    }

    /// `body` as a function of `param`: names other than `param` are evaluated now (they
    /// must be numbers), calls of earlier functions are kept.
    fn compile(&self, body: &Expr, param: &str) -> EResult<Num> {
        let at = body.span.start;
        let num = match &body.kind {
            ExprKind::Name(name) if name == param => Num::Var,
            ExprKind::Unary { op, operand } => match op {
                UnaryOp::Neg => Num::Neg(Box::new(self.compile(operand, param)?)),
                UnaryOp::Plus => self.compile(operand, param)?,
            },
            ExprKind::Binary { op, lhs, rhs } => Num::Binary(
                *op,
                Box::new(self.compile(lhs, param)?),
                Box::new(self.compile(rhs, param)?),
            ),
            ExprKind::Degrees(inner) => Num::Binary(
                BinaryOp::Mul,
                Box::new(self.compile(inner, param)?),
                Box::new(Num::Const(1f64.to_radians())),
            ),
            ExprKind::Call { name, args } if mentions(body, param) => {
                let [arg] = args.as_slice() else {
                    return Err((at, arity(name, args.len())));
                };
                let inner = Box::new(self.compile(arg, param)?);
                if let Some(f) = MathFn::by_name(name) {
                    Num::Apply(f, inner)
                } else if names::is_command(name) {
                    return Err((
                        at,
                        ErrorKind::NotAFunction {
                            name: name.clone(),
                            kind: "command of objects",
                        },
                    ));
                } else {
                    let i = self.resolve(name, body.span)?;
                    match &self.objects[i].value {
                        Value::Function(f) => Num::Call(f.clone(), inner),
                        other => {
                            return Err((
                                at,
                                ErrorKind::NotAFunction {
                                    name: name.clone(),
                                    kind: other.kind(),
                                },
                            ));
                        }
                    }
                }
            }
            ExprKind::Point(..) | ExprKind::Text(_) | ExprKind::Bool(_) => {
                let got = self
                    .value(body)
                    .map_or("a point", |v| v.kind_with_article());
                return Err((
                    at,
                    ErrorKind::WrongType {
                        expected: "a number",
                        got,
                    },
                ));
            }
            // A constant part: a number, a name, a call without the variable.
            _ => Num::Const(self.number(body)?),
        };
        Ok(num)
    }
}

/// Whether `param` occurs in `expr`.
fn mentions(expr: &Expr, param: &str) -> bool {
    match &expr.kind {
        ExprKind::Name(n) => n == param,
        ExprKind::Point(x, y) => mentions(x, param) || mentions(y, param),
        ExprKind::Call { args, .. } => args.iter().any(|a| mentions(a, param)),
        ExprKind::Unary { operand, .. } => mentions(operand, param),
        ExprKind::Binary { lhs, rhs, .. } => mentions(lhs, param) || mentions(rhs, param),
        ExprKind::Degrees(inner) => mentions(inner, param),
        ExprKind::Number(_) | ExprKind::Text(_) | ExprKind::Bool(_) => false,
    }
}

impl Num {
    /// Operations to compute one value.
    fn cost(&self) -> usize {
        match self {
            Num::Const(_) | Num::Var => 1,
            Num::Neg(inner) | Num::Apply(_, inner) => 1 + inner.cost(),
            Num::Binary(_, a, b) => 1 + a.cost() + b.cost(),
            Num::Call(f, inner) => f.cost.saturating_add(inner.cost()),
        }
    }
}

fn arity(name: &str, got: usize) -> ErrorKind {
    ErrorKind::FunctionArity {
        name: name.to_string(),
        got,
    }
}

fn checked_text(text: &str, at: usize) -> EResult<String> {
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err((at, ErrorKind::TextTooLong(MAX_TEXT_CHARS)));
    }
    Ok(text.to_string())
}

fn kinds(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::kind)
        .collect::<Vec<_>>()
        .join(", ")
}

fn unary(op: UnaryOp, value: Value, at: usize) -> EResult<Value> {
    let sign = if op == UnaryOp::Neg { -1.0 } else { 1.0 };
    Ok(match value {
        Value::Point(p) => Value::Point(p * sign),
        Value::Vector { start, d } => Value::Vector { start, d: d * sign },
        other => match other.as_number() {
            Some(n) => Value::Number(n * sign),
            None => {
                return Err((
                    at,
                    ErrorKind::WrongType {
                        expected: "a number, a point or a vector after a sign",
                        got: other.kind_with_article(),
                    },
                ));
            }
        },
    })
}

/// Arithmetic on numbers, points and vectors: a point moved by a vector or a point is a
/// point, vectors add to a vector, `*` of two points or vectors is their dot product.
fn binary(op: BinaryOp, a: Value, b: Value, at: usize) -> EResult<Value> {
    let verb = match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "subtract",
        BinaryOp::Mul => "multiply",
        BinaryOp::Div => "divide",
        BinaryOp::Pow => "raise",
    };
    let wrong = (
        at,
        ErrorKind::WrongOperands {
            op: verb,
            lhs: a.kind_with_article(),
            rhs: b.kind_with_article(),
        },
    );
    if let (Some(x), Some(y)) = (a.as_number(), b.as_number()) {
        return Ok(Value::Number(match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Pow => x.powf(y),
        }));
    }
    let planar = |v: &Value| match v {
        Value::Point(p) => Some((*p, false)),
        Value::Vector { d, .. } => Some((*d, true)),
        _ => None,
    };
    let result = match (op, planar(&a), planar(&b)) {
        (BinaryOp::Add | BinaryOp::Sub, Some((p, pv)), Some((q, qv))) => {
            let r = if op == BinaryOp::Add { p + q } else { p - q };
            if pv && qv {
                Value::Vector {
                    start: Pt::default(),
                    d: r,
                }
            } else {
                Value::Point(r)
            }
        }
        (BinaryOp::Mul, Some((p, _)), Some((q, _))) => Value::Number(p.dot(q)),
        (BinaryOp::Mul, Some(_), None) | (BinaryOp::Div, Some(_), None) => {
            let k = b.as_number().ok_or(wrong.clone())?;
            let k = if op == BinaryOp::Div { 1.0 / k } else { k };
            scale(a, k)
        }
        (BinaryOp::Mul, None, Some(_)) => {
            let k = a.as_number().ok_or(wrong.clone())?;
            scale(b, k)
        }
        _ => return Err(wrong),
    };
    Ok(result)
}

fn scale(v: Value, k: f64) -> Value {
    match v {
        Value::Vector { start, d } => Value::Vector { start, d: d * k },
        Value::Point(p) => Value::Point(p * k),
        other => other,
    }
}

/// Runs a command of the subset on evaluated arguments.
fn command(name: &'static str, expects: &'static str, args: &[Value], at: usize) -> EResult<Value> {
    let wrong = || {
        (
            at,
            ErrorKind::WrongArguments {
                command: name,
                expects,
                got: kinds(args),
            },
        )
    };
    let degenerate = |kind: ErrorKind| (at, kind);
    use Value as V;
    let value = match (name, args) {
        ("Point", [V::Point(p), V::Vector { d, .. }]) => V::Point(*p + *d),
        ("Point", [obj]) => V::Point(point_on(obj, None).ok_or_else(wrong)?),
        ("Point", [obj, t]) => {
            let t = t.as_number().ok_or_else(wrong)?;
            V::Point(point_on(obj, Some(t)).ok_or_else(wrong)?)
        }
        ("Segment", [V::Point(a), V::Point(b)]) => {
            distinct(*a, *b, "a segment needs two different points", at)?;
            V::Segment(*a, *b)
        }
        ("Line", [V::Point(a), V::Point(b)]) => {
            distinct(*a, *b, "a line needs two different points", at)?;
            V::Line { p: *a, d: *b - *a }
        }
        ("Line", [V::Point(p), other]) => {
            let l = other.as_linear().ok_or_else(wrong)?;
            nonzero(l.d, at)?;
            V::Line { p: *p, d: l.d }
        }
        ("Ray", [V::Point(a), V::Point(b)]) => {
            distinct(*a, *b, "a ray needs two different points", at)?;
            V::Ray { p: *a, d: *b - *a }
        }
        ("Ray", [V::Point(p), V::Vector { d, .. }]) => {
            nonzero(*d, at)?;
            V::Ray { p: *p, d: *d }
        }
        ("Vector", [V::Point(a), V::Point(b)]) => {
            distinct(*a, *b, "a vector needs two different points", at)?;
            V::Vector {
                start: *a,
                d: *b - *a,
            }
        }
        ("Vector", [V::Point(p)]) => V::Vector {
            start: Pt::default(),
            d: *p,
        },
        ("Circle", [V::Point(c), V::Point(q)]) => {
            distinct(*c, *q, "a circle through its own centre has no radius", at)?;
            circle(*c, c.dist(*q), at)?
        }
        ("Circle", [V::Point(c), V::Segment(a, b)]) => circle(*c, a.dist(*b), at)?,
        ("Circle", [V::Point(c), r]) => circle(*c, r.as_number().ok_or_else(wrong)?, at)?,
        ("Circle", [V::Point(a), V::Point(b), V::Point(c)]) => {
            let why = "a circle through three points needs three different points";
            distinct(*a, *b, why, at)?;
            distinct(*b, *c, why, at)?;
            distinct(*a, *c, why, at)?;
            let centre = geom::circumcentre(*a, *b, *c).ok_or(degenerate(ErrorKind::Collinear))?;
            circle(centre, centre.dist(*a), at)?
        }
        ("Polygon", vertices) if vertices.len() >= 3 => {
            let points: Vec<Pt> = vertices
                .iter()
                .map(|v| match v {
                    V::Point(p) => Some(*p),
                    _ => None,
                })
                .collect::<Option<_>>()
                .ok_or_else(wrong)?;
            let size: f64 = points.iter().map(|p| p.norm()).fold(1.0, f64::max);
            if geom::twice_area(&points).abs() <= geom::eps(size * size) {
                return Err(degenerate(ErrorKind::CoincidentPoints(
                    "the polygon's vertices are on one line, so it has no area",
                )));
            }
            V::Polygon(points)
        }
        ("Midpoint", [V::Point(a), V::Point(b)]) | ("Midpoint", [V::Segment(a, b)]) => {
            V::Point((*a + *b) / 2.0)
        }
        ("Intersect", [a, b]) => V::Point(intersections(a, b, at)?[0]),
        ("Intersect", [a, b, index]) => {
            let n = index.as_number().ok_or_else(wrong)?;
            let points = intersections(a, b, at)?;
            V::Point(nth(&points, n, at)?)
        }
        ("PerpendicularLine", [V::Point(p), l]) | ("PerpendicularLine", [l, V::Point(p)]) => {
            let l = l.as_linear().ok_or_else(wrong)?;
            nonzero(l.d, at)?;
            V::Line {
                p: *p,
                d: l.d.perp(),
            }
        }
        ("ParallelLine", [V::Point(p), l]) | ("ParallelLine", [l, V::Point(p)]) => {
            let l = l.as_linear().ok_or_else(wrong)?;
            nonzero(l.d, at)?;
            V::Line { p: *p, d: l.d }
        }
        ("AngleBisector", [V::Point(a), V::Point(b), V::Point(c)]) => {
            let (u, v) = arms(*a, *b, *c, at)?;
            let d = u.unit() + v.unit();
            // A straight angle: its bisector is perpendicular to the arms.
            let d = if d.norm() <= 1e-9 { u.unit().perp() } else { d };
            V::Line { p: *b, d }
        }
        ("AngleBisector", [l1, l2]) => {
            let (l1, l2) = (
                l1.as_linear().ok_or_else(wrong)?,
                l2.as_linear().ok_or_else(wrong)?,
            );
            let vertex = line_vertex(&l1, &l2, at)?;
            V::Line {
                p: vertex,
                d: l1.d.unit() + l2.d.unit(),
            }
        }
        ("Angle", [V::Point(a), V::Point(b), V::Point(c)]) => {
            let (u, v) = arms(*a, *b, *c, at)?;
            angle(*b, u, v)
        }
        ("Angle", [l1, l2]) => {
            let (l1, l2) = (
                l1.as_linear().ok_or_else(wrong)?,
                l2.as_linear().ok_or_else(wrong)?,
            );
            let vertex = line_vertex(&l1, &l2, at)?;
            angle(vertex, l1.d, l2.d)
        }
        ("Distance", [V::Point(a), V::Point(b)]) => V::Number(a.dist(*b)),
        ("Distance", [V::Point(p), l]) | ("Distance", [l, V::Point(p)]) => {
            let l = l.as_linear().ok_or_else(wrong)?;
            nonzero(l.d, at)?;
            V::Number(l.distance_to(*p))
        }
        ("Length", [V::Segment(a, b)]) => V::Number(a.dist(*b)),
        ("Length", [V::Vector { d, .. }]) => V::Number(d.norm()),
        ("Text", [content]) => text_value(content, None).ok_or_else(wrong)?,
        ("Text", [content, V::Point(p)]) => text_value(content, Some(*p)).ok_or_else(wrong)?,
        _ => return Err(wrong()),
    };
    Ok(value)
}

fn distinct(a: Pt, b: Pt, why: &'static str, at: usize) -> EResult<()> {
    if geom::same_point(a, b) {
        return Err((at, ErrorKind::CoincidentPoints(why)));
    }
    Ok(())
}

fn nonzero(d: Pt, at: usize) -> EResult<()> {
    if d.norm() <= 0.0 || !d.is_finite() {
        return Err((at, ErrorKind::ZeroDirection));
    }
    Ok(())
}

fn circle(centre: Pt, radius: f64, at: usize) -> EResult<Value> {
    if !radius.is_finite() || radius <= 0.0 {
        return Err((at, ErrorKind::BadRadius(radius)));
    }
    Ok(Value::Circle { centre, radius })
}

/// The arms of the angle at `b` between `a` and `c`.
fn arms(a: Pt, b: Pt, c: Pt, at: usize) -> EResult<(Pt, Pt)> {
    let why = "an angle's arms must lead away from its vertex";
    distinct(a, b, why, at)?;
    distinct(c, b, why, at)?;
    Ok((a - b, c - b))
}

/// The point where two lines make their angle.
fn line_vertex(l1: &Linear, l2: &Linear, at: usize) -> EResult<Pt> {
    nonzero(l1.d, at)?;
    nonzero(l2.d, at)?;
    match geom::cross_lines(l1, l2).0 {
        Crossing::Point(p) => Ok(p),
        Crossing::Parallel | Crossing::Same => Err((at, ErrorKind::ParallelNoAngle)),
    }
}

/// The angle at `vertex` from arm `u` to arm `v`, the smaller way round.
fn angle(vertex: Pt, u: Pt, v: Pt) -> Value {
    let sweep = geom::turn(u, v);
    Value::Angle {
        vertex,
        from: u.angle(),
        sweep,
        degrees: sweep.abs().to_degrees(),
    }
}

/// A point on `obj`: at parameter `t` (a segment's fraction, a line's or ray's multiple of
/// its direction, a circle's angle in radians), else a point of it.
fn point_on(obj: &Value, t: Option<f64>) -> Option<Pt> {
    if let Value::Circle { centre, radius } = obj {
        let t = t.unwrap_or(0.0);
        return Some(*centre + Pt::new(t.cos(), t.sin()) * *radius);
    }
    let l = obj.as_linear()?;
    let default = if l.extent == Extent::Segment {
        0.5
    } else {
        0.0
    };
    Some(l.at(t.unwrap_or(default)))
}

fn text_value(content: &Value, at: Option<Pt>) -> Option<Value> {
    let text = match content {
        Value::Text { text, .. } => text.clone(),
        Value::Number(n) => crate::table::format_number(*n),
        _ => return None,
    };
    Some(Value::Text { text, at })
}

fn nth(points: &[Pt], n: f64, at: usize) -> EResult<Pt> {
    if n.fract() != 0.0 || n < 1.0 {
        return Err((at, ErrorKind::BadIndex(n)));
    }
    let count = points.len();
    let index = n as usize;
    points
        .get(index - 1)
        .copied()
        .ok_or((at, ErrorKind::IntersectionIndex { index, count }))
}

/// Where two objects (lines, segments, rays, circles) meet: at least one point, ordered along
/// the first linear object, or left-first for two circles.
fn intersections(a: &Value, b: &Value, at: usize) -> EResult<Vec<Pt>> {
    let wrong = || {
        (
            at,
            ErrorKind::WrongArguments {
                command: "Intersect",
                expects: names::command_info("Intersect").map_or("", |c| c.expects),
                got: format!("{}, {}", a.kind(), b.kind()),
            },
        )
    };
    let as_circle = |v: &Value| match v {
        Value::Circle { centre, radius } => Some((*centre, *radius)),
        _ => None,
    };
    let points = match (a.as_linear(), b.as_linear(), as_circle(a), as_circle(b)) {
        (Some(l1), Some(l2), _, _) => {
            nonzero(l1.d, at)?;
            nonzero(l2.d, at)?;
            match geom::cross_lines(&l1, &l2) {
                (Crossing::Point(p), t, s) if l1.contains_t(t) && l2.contains_t(s) => vec![p],
                (Crossing::Point(_), _, _) => Vec::new(),
                (Crossing::Parallel, _, _) => return Err((at, ErrorKind::ParallelLines)),
                (Crossing::Same, _, _) => return Err((at, ErrorKind::SameLine)),
            }
        }
        (Some(l), None, None, Some((c, r))) | (None, Some(l), Some((c, r)), None) => {
            nonzero(l.d, at)?;
            geom::line_circle(&l, c, r)
                .into_iter()
                .filter(|(_, t)| l.contains_t(*t))
                .map(|(p, _)| p)
                .collect()
        }
        (None, None, Some((c1, r1)), Some((c2, r2))) => match geom::circle_circle(c1, r1, c2, r2) {
            CircleCrossing::Points(points) => points,
            CircleCrossing::Same => return Err((at, ErrorKind::SameCircle)),
        },
        _ => return Err(wrong()),
    };
    if points.is_empty() {
        return Err((at, ErrorKind::NoIntersection));
    }
    Ok(points)
}

/// Names for unnamed objects: points `A`–`Z` then `A_1`…, angles `α`… then `α_1`…, the rest
/// by kind (`segment1`, `circle1`, …); never a name the script assigns anywhere.
struct AutoNames {
    taken: HashSet<String>,
}

const GREEK: &[&str] = &[
    "α", "β", "γ", "δ", "ε", "ζ", "η", "θ", "κ", "λ", "μ", "ν", "ξ", "ρ", "σ", "τ", "φ", "χ", "ψ",
    "ω",
];

impl AutoNames {
    fn next(&mut self, value: &Value) -> String {
        let letters: Vec<String> = match value {
            Value::Point(_) => ('A'..='Z').map(String::from).collect(),
            Value::Angle { .. } => GREEK.iter().map(|g| g.to_string()).collect(),
            other => vec![other.kind().to_string()],
        };
        let numbered = letters.len() == 1;
        let mut round = 0;
        loop {
            for letter in &letters {
                let name = match (numbered, round) {
                    (true, n) => format!("{letter}{}", n + 1),
                    (false, 0) => letter.clone(),
                    (false, n) => format!("{letter}_{n}"),
                };
                if self.taken.insert(name.clone()) {
                    return name;
                }
            }
            round += 1;
        }
    }
}
