//! A normalised LaTeX answer as an expression: parsed by recursive descent (fractions, roots,
//! powers, functions, implicit multiplication, `|x|`), evaluated in Rust when it is a constant,
//! and printed in sympy's syntax when symbolic equivalence needs sympy.

/// The deepest nesting parsed (an answer is short; a hostile one is refused, not recursed).
const MAX_DEPTH: usize = 64;

/// The most tokens parsed: a longer "answer" is not one, and a long chain of operations would
/// make a tree too deep to evaluate, print or drop by recursion.
const MAX_TOKENS: usize = 400;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Num(String),
    Sym(String),
    Pi,
    Euler,
    Imaginary,
    Infinity,
    Neg(Box<Expr>),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    Div(Box<Expr>, Box<Expr>),
    Pow(Box<Expr>, Box<Expr>),
    Func(&'static str, Box<Expr>),
    Factorial(Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(String),
    Letter(char),
    Cmd(String),
    Open(char),
    Close(char),
    Op(char),
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            if text.matches('.').count() > 1 {
                return None;
            }
            out.push(Tok::Num(text));
        } else if c.is_ascii_alphabetic() {
            out.push(Tok::Letter(c));
            i += 1;
        } else if c == '\\' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
            if i == start {
                // `\{`, `\|` and the like: not part of an expression we evaluate.
                return None;
            }
            out.push(Tok::Cmd(chars[start..i].iter().collect()));
        } else if matches!(c, '(' | '[' | '{') {
            out.push(Tok::Open(c));
            i += 1;
        } else if matches!(c, ')' | ']' | '}') {
            out.push(Tok::Close(c));
            i += 1;
        } else if matches!(c, '+' | '-' | '*' | '/' | '^' | '_' | '!' | '|' | '\'') {
            out.push(Tok::Op(c));
            i += 1;
        } else {
            return None;
        }
    }
    Some(out)
}

const GREEK: [&str; 22] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "phi",
    "varphi",
    "omega",
];

const FUNCS: [(&str, &str); 14] = [
    ("sin", "sin"),
    ("cos", "cos"),
    ("tan", "tan"),
    ("cot", "cot"),
    ("sec", "sec"),
    ("csc", "csc"),
    ("arcsin", "asin"),
    ("arccos", "acos"),
    ("arctan", "atan"),
    ("ln", "log"),
    ("log", "log"),
    ("exp", "exp"),
    ("sinh", "sinh"),
    ("cosh", "cosh"),
];

struct Parser {
    toks: Vec<Tok>,
    at: usize,
    depth: usize,
}

/// Parse a normalised answer; `None` when it is not an expression this grammar knows.
pub(crate) fn parse(text: &str) -> Option<Expr> {
    let toks = tokenize(text)?;
    if toks.is_empty() || toks.len() > MAX_TOKENS {
        return None;
    }
    let mut p = Parser {
        toks,
        at: 0,
        depth: 0,
    };
    let e = p.expr()?;
    (p.at == p.toks.len()).then_some(e)
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == Some(tok) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn expr(&mut self) -> Option<Expr> {
        self.enter()?;
        let mut left = self.term()?;
        loop {
            if self.eat(&Tok::Op('+')) {
                left = Expr::Add(Box::new(left), Box::new(self.term()?));
            } else if self.eat(&Tok::Op('-')) {
                left = Expr::Sub(Box::new(left), Box::new(self.term()?));
            } else if self.peek() == Some(&Tok::Cmd("pm".into())) {
                return None;
            } else {
                break;
            }
        }
        self.depth -= 1;
        Some(left)
    }

    fn term(&mut self) -> Option<Expr> {
        let mut left = self.unary()?;
        loop {
            match self.peek() {
                Some(Tok::Op('*')) => {
                    self.at += 1;
                    left = Expr::Mul(Box::new(left), Box::new(self.unary()?));
                }
                Some(Tok::Cmd(c)) if c == "cdot" || c == "times" => {
                    self.at += 1;
                    left = Expr::Mul(Box::new(left), Box::new(self.unary()?));
                }
                Some(Tok::Op('/')) => {
                    self.at += 1;
                    left = Expr::Div(Box::new(left), Box::new(self.unary()?));
                }
                Some(Tok::Cmd(c)) if c == "div" => {
                    self.at += 1;
                    left = Expr::Div(Box::new(left), Box::new(self.unary()?));
                }
                Some(t) if starts_atom(t) => {
                    left = Expr::Mul(Box::new(left), Box::new(self.power()?));
                }
                _ => break,
            }
        }
        Some(left)
    }

    fn unary(&mut self) -> Option<Expr> {
        self.enter()?;
        let e = if self.eat(&Tok::Op('-')) {
            Expr::Neg(Box::new(self.unary()?))
        } else if self.eat(&Tok::Op('+')) {
            self.unary()?
        } else {
            self.power()?
        };
        self.depth -= 1;
        Some(e)
    }

    fn power(&mut self) -> Option<Expr> {
        let mut base = self.atom()?;
        loop {
            if self.eat(&Tok::Op('!')) {
                base = Expr::Factorial(Box::new(base));
            } else if self.eat(&Tok::Op('^')) {
                let exponent = self.exponent()?;
                base = Expr::Pow(Box::new(base), Box::new(exponent));
            } else {
                break;
            }
        }
        Some(base)
    }

    /// `^{…}`, `^2`, `^x`, `^\pi`, `^-1` (a single token after `^`).
    fn exponent(&mut self) -> Option<Expr> {
        match self.peek()? {
            Tok::Open('{') => self.group(),
            Tok::Num(n) => {
                // `x^23` in LaTeX is x²·3: only the first digit is the exponent.
                let n = n.clone();
                self.at += 1;
                let mut digits = n.chars();
                let first = digits.next()?;
                let rest: String = digits.collect();
                if !rest.is_empty() {
                    self.toks.insert(self.at, Tok::Num(rest));
                }
                Some(Expr::Num(first.to_string()))
            }
            Tok::Op('-') => {
                self.at += 1;
                Some(Expr::Neg(Box::new(self.atom()?)))
            }
            _ => self.atom(),
        }
    }

    fn group(&mut self) -> Option<Expr> {
        let open = match self.next()? {
            Tok::Open(c) => c,
            _ => return None,
        };
        let close = match open {
            '(' => ')',
            '[' => ']',
            _ => '}',
        };
        let e = self.expr()?;
        // `(…]` is an interval's bracket, not a group: refuse.
        (self.next()? == Tok::Close(close)).then_some(e)
    }

    fn atom(&mut self) -> Option<Expr> {
        self.enter()?;
        let e = match self.peek()?.clone() {
            Tok::Num(n) => {
                self.at += 1;
                Expr::Num(n)
            }
            Tok::Letter(c) => {
                self.at += 1;
                self.subscripted(letter(c))?
            }
            Tok::Open(_) => self.group()?,
            Tok::Op('|') => {
                self.at += 1;
                let inner = self.expr()?;
                if !self.eat(&Tok::Op('|')) {
                    return None;
                }
                Expr::Func("Abs", Box::new(inner))
            }
            Tok::Cmd(cmd) => {
                self.at += 1;
                self.command(&cmd)?
            }
            _ => return None,
        };
        self.depth -= 1;
        Some(e)
    }

    /// `x_1`, `a_{n}`: one symbol named `x_1`.
    fn subscripted(&mut self, base: Expr) -> Option<Expr> {
        if !self.eat(&Tok::Op('_')) {
            return Some(base);
        }
        let Expr::Sym(name) = base else {
            return None;
        };
        let sub = match self.next()? {
            Tok::Num(n) => n,
            Tok::Letter(c) => c.to_string(),
            Tok::Open('{') => {
                let mut s = String::new();
                loop {
                    match self.next()? {
                        Tok::Close('}') => break,
                        Tok::Num(n) => s.push_str(&n),
                        Tok::Letter(c) => s.push(c),
                        _ => return None,
                    }
                }
                s
            }
            _ => return None,
        };
        Some(Expr::Sym(format!("{name}_{sub}")))
    }

    fn command(&mut self, cmd: &str) -> Option<Expr> {
        match cmd {
            "frac" | "cfrac" => {
                let num = self.group()?;
                let den = self.group()?;
                Some(Expr::Div(Box::new(num), Box::new(den)))
            }
            "sqrt" => {
                if self.peek() == Some(&Tok::Open('[')) {
                    let index = self.group()?;
                    let radicand = self.group()?;
                    return Some(Expr::Pow(
                        Box::new(radicand),
                        Box::new(Expr::Div(Box::new(Expr::Num("1".into())), Box::new(index))),
                    ));
                }
                let radicand = self.group()?;
                Some(Expr::Func("sqrt", Box::new(radicand)))
            }
            "pi" => Some(Expr::Pi),
            "infty" => Some(Expr::Infinity),
            "mathrm" | "text" => {
                // Left by normalisation only when nested: `\mathrm{e}`.
                self.group()
            }
            "cdot" | "times" => None,
            _ => {
                if let Some(&(_, name)) = FUNCS.iter().find(|(latex, _)| *latex == cmd) {
                    return self.function(name);
                }
                GREEK
                    .contains(&cmd)
                    .then(|| Expr::Sym(greek_name(cmd)))
                    .and_then(|s| self.subscripted(s))
            }
        }
    }

    /// `\sin x`, `\sin(x)`, `\sin^2 x`, `\log_2 8`.
    fn function(&mut self, name: &'static str) -> Option<Expr> {
        let mut power = None;
        let mut base = None;
        if self.eat(&Tok::Op('^')) {
            power = Some(self.exponent()?);
        }
        if name == "log" && self.eat(&Tok::Op('_')) {
            base = Some(self.exponent()?);
        }
        let arg = self.power()?;
        let mut e = Expr::Func(name, Box::new(arg));
        if let Some(b) = base {
            e = Expr::Div(Box::new(e), Box::new(Expr::Func("log", Box::new(b))));
        }
        if let Some(p) = power {
            e = Expr::Pow(Box::new(e), Box::new(p));
        }
        Some(e)
    }
}

fn starts_atom(t: &Tok) -> bool {
    match t {
        Tok::Num(_) | Tok::Letter(_) | Tok::Open(_) => true,
        Tok::Cmd(c) => c != "cdot" && c != "times" && c != "div" && c != "pm",
        _ => false,
    }
}

fn letter(c: char) -> Expr {
    match c {
        'e' => Expr::Euler,
        'i' => Expr::Imaginary,
        _ => Expr::Sym(c.to_string()),
    }
}

/// sympy spells the Greek letter `lamda` (`lambda` is a Python keyword).
fn greek_name(cmd: &str) -> String {
    match cmd {
        "lambda" => "lamda".into(),
        "varepsilon" => "epsilon".into(),
        "vartheta" => "theta".into(),
        "varphi" => "phi".into(),
        other => other.to_string(),
    }
}

impl Expr {
    /// The value of a constant expression (no symbols, real, finite).
    pub(crate) fn eval(&self) -> Option<f64> {
        let v = match self {
            Expr::Num(n) => n.parse().ok()?,
            Expr::Sym(_) | Expr::Imaginary | Expr::Infinity => return None,
            Expr::Pi => std::f64::consts::PI,
            Expr::Euler => std::f64::consts::E,
            Expr::Neg(a) => -a.eval()?,
            Expr::Add(a, b) => a.eval()? + b.eval()?,
            Expr::Sub(a, b) => a.eval()? - b.eval()?,
            Expr::Mul(a, b) => a.eval()? * b.eval()?,
            Expr::Div(a, b) => a.eval()? / b.eval()?,
            Expr::Pow(a, b) => a.eval()?.powf(b.eval()?),
            Expr::Factorial(a) => {
                let n = a.eval()?;
                if n < 0.0 || n.fract() != 0.0 || n > 170.0 {
                    return None;
                }
                (1..=n as u64).map(|k| k as f64).product()
            }
            Expr::Func(name, a) => {
                let x = a.eval()?;
                match *name {
                    "sqrt" => x.sqrt(),
                    "Abs" => x.abs(),
                    "sin" => x.sin(),
                    "cos" => x.cos(),
                    "tan" => x.tan(),
                    "cot" => 1.0 / x.tan(),
                    "sec" => 1.0 / x.cos(),
                    "csc" => 1.0 / x.sin(),
                    "asin" => x.asin(),
                    "acos" => x.acos(),
                    "atan" => x.atan(),
                    "log" => x.ln(),
                    "exp" => x.exp(),
                    "sinh" => x.sinh(),
                    "cosh" => x.cosh(),
                    _ => return None,
                }
            }
        };
        v.is_finite().then_some(v)
    }

    /// Free symbols, sorted and deduplicated.
    pub(crate) fn symbols(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_symbols(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_symbols(&self, out: &mut Vec<String>) {
        match self {
            Expr::Sym(s) => out.push(s.clone()),
            Expr::Neg(a) | Expr::Func(_, a) | Expr::Factorial(a) => a.collect_symbols(out),
            Expr::Add(a, b)
            | Expr::Sub(a, b)
            | Expr::Mul(a, b)
            | Expr::Div(a, b)
            | Expr::Pow(a, b) => {
                a.collect_symbols(out);
                b.collect_symbols(out);
            }
            _ => {}
        }
    }

    /// The expression in sympy's syntax (every operation parenthesised).
    pub(crate) fn sympy(&self) -> String {
        match self {
            Expr::Num(n) => n.clone(),
            Expr::Sym(s) => s.clone(),
            Expr::Pi => "pi".into(),
            Expr::Euler => "E".into(),
            Expr::Imaginary => "I".into(),
            Expr::Infinity => "oo".into(),
            Expr::Neg(a) => format!("(-{})", a.sympy()),
            Expr::Add(a, b) => format!("({}+{})", a.sympy(), b.sympy()),
            Expr::Sub(a, b) => format!("({}-{})", a.sympy(), b.sympy()),
            Expr::Mul(a, b) => format!("({}*{})", a.sympy(), b.sympy()),
            Expr::Div(a, b) => format!("({}/{})", a.sympy(), b.sympy()),
            Expr::Pow(a, b) => format!("({}**{})", a.sympy(), b.sympy()),
            Expr::Func(name, a) => format!("{name}({})", a.sympy()),
            Expr::Factorial(a) => format!("factorial({})", a.sympy()),
        }
    }
}
