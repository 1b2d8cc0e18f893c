//! Reading a script: one command per line, by recursive descent with a depth bound.
//!
//! ```text
//! command   := name ('=' | ':') expr          assignment
//!            | name '(' name ')' '=' expr      function of one variable
//!            | expr                            an unnamed object, or a style command
//! expr      := term (('+' | '-') term)*
//! term      := unary (('*' | '/') unary | unary)*    (juxtaposition multiplies: 2x, 3(x+1))
//! unary     := ('-' | '+') unary | power
//! power     := postfix ('^' unary)?
//! postfix   := primary '°'?
//! primary   := number | "text" | true | false | name | name '(' args? ')'
//!            | '(' expr ')' | '(' expr ',' expr ')'
//! ```

use crate::ast::{BinaryOp, Command, Expr, ExprKind, Span, Statement, UnaryOp};
use crate::error::{ErrorKind, GeoError};
use crate::lexer::{Tok, Token, tokenize};
use crate::limits::{MAX_COMMANDS, MAX_DEPTH, MAX_LINE_CHARS};
use crate::names::{self, FUNCTIONS};

/// A script, read: the commands that parsed and an error for each line that did not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub commands: Vec<Command>,
    pub errors: Vec<GeoError>,
}

/// Reads every non-blank line of `text` as one command (lines are numbered from 1, blank ones
/// included). A line that does not parse is reported and skipped; the others still parse.
pub fn parse_script(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut functions: Vec<String> = Vec::new();
    let mut count = 0;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        count += 1;
        if count > MAX_COMMANDS {
            parsed.errors.push(GeoError {
                line,
                column: 1,
                command: trimmed.to_string(),
                kind: ErrorKind::TooManyCommands(MAX_COMMANDS),
            });
            break;
        }
        match parse_line(trimmed, &functions) {
            Ok(statement) => {
                if let Statement::Function { name, .. } = &statement {
                    functions.push(name.clone());
                }
                parsed.commands.push(Command {
                    line,
                    text: trimmed.to_string(),
                    statement,
                });
            }
            Err((column, kind)) => parsed.errors.push(GeoError {
                line,
                column,
                command: trimmed.to_string(),
                kind,
            }),
        }
    }
    parsed
}

/// Reads one command. `functions`: the functions defined on earlier lines (`f(2)` calls one).
pub fn parse_command(text: &str, functions: &[String]) -> Result<Statement, (usize, ErrorKind)> {
    parse_line(text.trim(), functions)
}

fn parse_line(line: &str, functions: &[String]) -> Result<Statement, (usize, ErrorKind)> {
    let length = line.chars().count();
    if length > MAX_LINE_CHARS {
        return Err((1, ErrorKind::LineTooLong(MAX_LINE_CHARS)));
    }
    let tokens = tokenize(line)?;
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
        end_column: length + 1,
        functions,
    };
    let statement = parser.statement()?;
    parser.expect_end()?;
    Ok(statement)
}

type PResult<T> = Result<T, (usize, ErrorKind)>;

struct Parser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    end_column: usize,
    functions: &'a [String],
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.tok)
    }

    fn peek_at(&self, offset: usize) -> Option<&Tok> {
        self.tokens.get(self.pos + offset).map(|t| &t.tok)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    /// The column of the next token (or the end of the line).
    fn column(&self) -> usize {
        self.tokens
            .get(self.pos)
            .map_or(self.end_column, |t| t.span.start)
    }

    fn unexpected(&self, expected: &'static str) -> (usize, ErrorKind) {
        match self.tokens.get(self.pos) {
            Some(token) => (
                token.span.start,
                ErrorKind::Unexpected {
                    expected,
                    found: token.tok.describe(),
                },
            ),
            None => (self.end_column, ErrorKind::UnexpectedEnd { expected }),
        }
    }

    fn expect(&mut self, tok: &Tok, expected: &'static str) -> PResult<Span> {
        match self.tokens.get(self.pos) {
            Some(token) if &token.tok == tok => {
                self.pos += 1;
                Ok(token.span)
            }
            _ => Err(self.unexpected(expected)),
        }
    }

    fn expect_end(&self) -> PResult<()> {
        if self.pos < self.tokens.len() {
            return Err(self.unexpected("the end of the command"));
        }
        Ok(())
    }

    fn statement(&mut self) -> PResult<Statement> {
        let is_assign = |t: Option<&Tok>| matches!(t, Some(Tok::Equals | Tok::Colon));
        if let (Some(Tok::Name(name)), Some(Tok::LParen), Some(Tok::Name(param)), Some(Tok::RParen)) = (
            self.peek(),
            self.peek_at(1),
            self.peek_at(2),
            self.peek_at(3),
        ) && is_assign(self.peek_at(4))
            && !names::is_command(name)
            && !FUNCTIONS.contains(&name.as_str())
        {
            let (name, param) = (name.clone(), param.clone());
            self.check_name(&name, self.column())?;
            if names::is_command(&param) || names::CONSTANTS.iter().any(|(c, _)| *c == param) {
                return Err((
                    self.tokens[self.pos + 2].span.start,
                    ErrorKind::Reserved(param),
                ));
            }
            self.pos += 5;
            let body = self.expr()?;
            return Ok(Statement::Function { name, param, body });
        }
        if let Some(Tok::Name(name)) = self.peek()
            && is_assign(self.peek_at(1))
        {
            let name = name.clone();
            self.check_name(&name, self.column())?;
            self.pos += 2;
            let expr = self.expr()?;
            return Ok(Statement::Assign { name, expr });
        }
        Ok(Statement::Bare(self.expr()?))
    }

    fn check_name(&self, name: &str, column: usize) -> PResult<()> {
        if names::is_reserved(name) {
            return Err((column, ErrorKind::Reserved(name.to_string())));
        }
        Ok(())
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err((self.column(), ErrorKind::TooDeep(MAX_DEPTH)));
        }
        Ok(())
    }

    fn expr(&mut self) -> PResult<Expr> {
        let mut lhs = self.term()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Plus) => BinaryOp::Add,
                Some(Tok::Minus) => BinaryOp::Sub,
                _ => return Ok(lhs),
            };
            self.pos += 1;
            let rhs = self.term()?;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn term(&mut self) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Star) => BinaryOp::Mul,
                Some(Tok::Slash) => BinaryOp::Div,
                // Juxtaposition: `2x`, `3(x + 1)`, `(x + 1)(x - 1)`, `2 sqrt(3)`.
                Some(Tok::Name(_) | Tok::LParen) => {
                    let rhs = self.unary()?;
                    lhs = binary(BinaryOp::Mul, lhs, rhs);
                    continue;
                }
                _ => return Ok(lhs),
            };
            self.pos += 1;
            let rhs = self.unary()?;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let op = match self.peek() {
            Some(Tok::Minus) => Some(UnaryOp::Neg),
            Some(Tok::Plus) => Some(UnaryOp::Plus),
            _ => None,
        };
        let result = match op {
            Some(op) => {
                let start = self.column();
                self.pos += 1;
                let operand = self.unary()?;
                let span = Span {
                    start,
                    end: operand.span.end,
                };
                Expr::new(
                    ExprKind::Unary {
                        op,
                        operand: Box::new(operand),
                    },
                    span,
                )
            }
            None => self.power()?,
        };
        self.depth -= 1;
        Ok(result)
    }

    fn power(&mut self) -> PResult<Expr> {
        let base = self.postfix()?;
        if self.peek() != Some(&Tok::Caret) {
            return Ok(base);
        }
        self.pos += 1;
        let exponent = self.unary()?;
        Ok(binary(BinaryOp::Pow, base, exponent))
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut inner = self.primary()?;
        while let Some(Token {
            tok: Tok::Degree,
            span,
        }) = self.tokens.get(self.pos)
        {
            let span = Span {
                start: inner.span.start,
                end: span.end,
            };
            self.pos += 1;
            inner = Expr::new(ExprKind::Degrees(Box::new(inner)), span);
        }
        Ok(inner)
    }

    fn primary(&mut self) -> PResult<Expr> {
        let Some(token) = self.next() else {
            return Err((
                self.end_column,
                ErrorKind::UnexpectedEnd {
                    expected: "an expression",
                },
            ));
        };
        let span = token.span;
        match token.tok {
            Tok::Number(n) => Ok(Expr::new(ExprKind::Number(n), span)),
            Tok::Text(t) => Ok(Expr::new(ExprKind::Text(t), span)),
            Tok::Name(name) if self.peek() == Some(&Tok::LParen) => self.call(name, span),
            Tok::Name(name) => Ok(Expr::new(
                match name.as_str() {
                    "true" => ExprKind::Bool(true),
                    "false" => ExprKind::Bool(false),
                    _ => ExprKind::Name(name),
                },
                span,
            )),
            Tok::LParen => self.parenthesised(span),
            _ => {
                self.pos -= 1;
                Err(self.unexpected("an expression"))
            }
        }
    }

    /// After `(`: a parenthesised expression or a point.
    fn parenthesised(&mut self, open: Span) -> PResult<Expr> {
        self.enter()?;
        let first = self.expr()?;
        let result = if self.peek() == Some(&Tok::Comma) {
            self.pos += 1;
            let second = self.expr()?;
            let close = self.expect(&Tok::RParen, "')' after a point's two coordinates")?;
            Expr::new(
                ExprKind::Point(Box::new(first), Box::new(second)),
                Span {
                    start: open.start,
                    end: close.end,
                },
            )
        } else {
            self.expect(&Tok::RParen, "')' or ','")?;
            first
        };
        self.depth -= 1;
        Ok(result)
    }

    /// `name(` … `)`: a command, a maths function, or a function defined earlier.
    fn call(&mut self, name: String, name_span: Span) -> PResult<Expr> {
        self.check_callable(&name, name_span.start)?;
        self.enter()?;
        self.pos += 1; // `(`
        let mut args = Vec::new();
        if self.peek() == Some(&Tok::RParen) {
            self.pos += 1;
        } else {
            loop {
                args.push(self.expr()?);
                match self.peek() {
                    Some(Tok::Comma) => self.pos += 1,
                    Some(Tok::RParen) => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.unexpected("',' or ')'")),
                }
            }
        }
        self.depth -= 1;
        let end = self
            .tokens
            .get(self.pos - 1)
            .map_or(self.end_column, |t| t.span.end);
        Ok(Expr::new(
            ExprKind::Call { name, args },
            Span {
                start: name_span.start,
                end,
            },
        ))
    }

    /// A name called like a command must be one, a maths function, or a function of the
    /// script; a misspelt command is named with the nearest one.
    fn check_callable(&self, name: &str, column: usize) -> PResult<()> {
        if names::is_command(name)
            || FUNCTIONS.contains(&name)
            || self.functions.iter().any(|f| f == name)
        {
            return Ok(());
        }
        let suggestion = names::nearest(name, names::callables());
        let alternative = names::alternative(name);
        let looks_like_command = name.chars().next().is_some_and(char::is_uppercase);
        if suggestion.is_some() || alternative.is_some() || looks_like_command {
            return Err((
                column,
                ErrorKind::UnknownCommand {
                    name: name.to_string(),
                    suggestion: suggestion.map(str::to_string),
                    alternative: alternative.map(str::to_string),
                },
            ));
        }
        // A lower-case name: a function the evaluator will look for (and name if missing).
        Ok(())
    }
}

fn binary(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    let span = Span {
        start: lhs.span.start,
        end: rhs.span.end,
    };
    Expr::new(
        ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        span,
    )
}
