//! What a script is made of: one [`Command`] per line, each a [`Statement`] over
//! [`Expr`]essions. Every expression keeps the columns it came from, so an error found while
//! evaluating it can point at the argument at fault. Printing (`Display`) writes the canonical
//! form that parses back to the same tree.

use std::fmt;

/// Columns of a line, 1-based, in characters: `start` is the first, `end` one past the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// One line of a script.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// 1-based.
    pub line: usize,
    /// The line as written (trimmed).
    pub text: String,
    pub statement: Statement,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `A = (1, 2)`, `c = Circle(A, 3)` (also written `c: Circle(A, 3)`).
    Assign { name: String, expr: Expr },
    /// `f(x) = x^2 - 1`: a function of one variable, drawn as its graph.
    Function {
        name: String,
        param: String,
        body: Expr,
    },
    /// An unnamed object (`Segment(A, B)`, `(1, 2)`) or a change of one
    /// (`SetColor(c, "red")`).
    Bare(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Number(f64),
    Text(String),
    Bool(bool),
    /// An object's name, `x` in a function's body, or a constant (`pi`, `e`).
    Name(String),
    /// `(x, y)`.
    Point(Box<Expr>, Box<Expr>),
    /// A command (`Circle(A, 3)`), a maths function (`sqrt(2)`) or a function defined
    /// earlier in the script (`f(2)`).
    Call {
        name: String,
        args: Vec<Expr>,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `30°`: degrees, as radians.
    Degrees(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Plus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
}

impl BinaryOp {
    fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => " + ",
            BinaryOp::Sub => " - ",
            BinaryOp::Mul => " * ",
            BinaryOp::Div => " / ",
            BinaryOp::Pow => "^",
        }
    }

    fn precedence(self) -> u8 {
        match self {
            BinaryOp::Add | BinaryOp::Sub => 1,
            BinaryOp::Mul | BinaryOp::Div => 2,
            BinaryOp::Pow => 4,
        }
    }
}

/// Unary signs bind looser than `^` (`-x^2` is `-(x^2)`), tighter than `*`.
const UNARY: u8 = 3;
const ATOM: u8 = 5;

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Self {
        Expr { kind, span }
    }

    fn precedence(&self) -> u8 {
        match &self.kind {
            ExprKind::Binary { op, .. } => op.precedence(),
            ExprKind::Unary { .. } => UNARY,
            // A negative literal never comes from parsing (`-3` is a sign and a number), but
            // a built tree may hold one: it prints as a sign, so it binds like one.
            ExprKind::Number(n) if n.is_sign_negative() => UNARY,
            _ => ATOM,
        }
    }

    /// Whether the tree equals `other`, columns aside.
    pub fn same_as(&self, other: &Expr) -> bool {
        use ExprKind as K;
        match (&self.kind, &other.kind) {
            (K::Number(a), K::Number(b)) => a == b,
            (K::Text(a), K::Text(b)) => a == b,
            (K::Bool(a), K::Bool(b)) => a == b,
            (K::Name(a), K::Name(b)) => a == b,
            (K::Point(ax, ay), K::Point(bx, by)) => ax.same_as(bx) && ay.same_as(by),
            (K::Call { name: a, args: x }, K::Call { name: b, args: y }) => {
                a == b && x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.same_as(q))
            }
            (K::Unary { op: a, operand: x }, K::Unary { op: b, operand: y }) => {
                a == b && x.same_as(y)
            }
            (
                K::Binary {
                    op: a,
                    lhs: al,
                    rhs: ar,
                },
                K::Binary {
                    op: b,
                    lhs: bl,
                    rhs: br,
                },
            ) => a == b && al.same_as(bl) && ar.same_as(br),
            (K::Degrees(a), K::Degrees(b)) => a.same_as(b),
            _ => false,
        }
    }

    /// Writes `self`, in parentheses when it binds looser than `min`.
    fn write_at(&self, f: &mut fmt::Formatter<'_>, min: u8) -> fmt::Result {
        if self.precedence() < min {
            f.write_str("(")?;
            self.write_bare(f)?;
            f.write_str(")")
        } else {
            self.write_bare(f)
        }
    }

    fn write_bare(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Number(n) => write!(f, "{n}"),
            ExprKind::Text(t) => write_quoted(f, t),
            ExprKind::Bool(b) => write!(f, "{b}"),
            ExprKind::Name(n) => f.write_str(n),
            ExprKind::Point(x, y) => write!(f, "({x}, {y})"),
            ExprKind::Call { name, args } => {
                write!(f, "{name}(")?;
                for (i, arg) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{arg}")?;
                }
                f.write_str(")")
            }
            ExprKind::Unary { op, operand } => {
                f.write_str(match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Plus => "+",
                })?;
                operand.write_at(f, UNARY)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let p = op.precedence();
                // `^` is right-associative and its base is an atom; the others are
                // left-associative, so an equal right operand needs parentheses.
                let (left, right) = match op {
                    BinaryOp::Pow => (ATOM, UNARY),
                    _ => (p, p + 1),
                };
                lhs.write_at(f, left)?;
                f.write_str(op.symbol())?;
                rhs.write_at(f, right)
            }
            ExprKind::Degrees(inner) => {
                inner.write_at(f, ATOM)?;
                f.write_str("°")
            }
        }
    }
}

fn write_quoted(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in text.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_at(f, 0)
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Assign { name, expr } => write!(f, "{name} = {expr}"),
            Statement::Function { name, param, body } => write!(f, "{name}({param}) = {body}"),
            Statement::Bare(expr) => write!(f, "{expr}"),
        }
    }
}

impl Statement {
    /// Whether the statement equals `other`, columns aside.
    pub fn same_as(&self, other: &Statement) -> bool {
        match (self, other) {
            (Statement::Assign { name: a, expr: x }, Statement::Assign { name: b, expr: y }) => {
                a == b && x.same_as(y)
            }
            (
                Statement::Function {
                    name: a,
                    param: p,
                    body: x,
                },
                Statement::Function {
                    name: b,
                    param: q,
                    body: y,
                },
            ) => a == b && p == q && x.same_as(y),
            (Statement::Bare(x), Statement::Bare(y)) => x.same_as(y),
            _ => false,
        }
    }

    /// The name it assigns, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            Statement::Assign { name, .. } | Statement::Function { name, .. } => Some(name),
            Statement::Bare(_) => None,
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.statement.fmt(f)
    }
}
