//! Errors, each at a line and column of the script and naming the command it is in.

use std::fmt;

use crate::names::COMMANDS;

/// What is wrong, read or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ErrorKind {
    // Reading.
    #[error("unexpected character '{0}'")]
    UnexpectedChar(char),
    #[error("'{0}' is not a number this parser can read (digits, at most one '.', finite)")]
    BadNumber(String),
    #[error("a name is longer than {0} characters")]
    NameTooLong(usize),
    #[error("a text is missing its closing '\"'")]
    UnterminatedText,
    #[error("the command is longer than {0} characters")]
    LineTooLong(usize),
    #[error("the expression is nested more than {0} levels deep")]
    TooDeep(usize),
    #[error("the script has more than {0} commands")]
    TooManyCommands(usize),
    #[error("expected {expected}, found {found}")]
    Unexpected {
        expected: &'static str,
        found: String,
    },
    #[error("the command ends where {expected} was expected")]
    UnexpectedEnd { expected: &'static str },
    #[error("{}", unknown_command(name, suggestion.as_deref(), alternative.as_deref()))]
    UnknownCommand {
        name: String,
        suggestion: Option<String>,
        /// How to build it with the subset, for a GeoGebra command the subset lacks.
        alternative: Option<String>,
    },
    #[error(
        "'{0}' is reserved (a command, a function, a constant or a coordinate) and cannot name an object"
    )]
    Reserved(String),

    // Names.
    #[error("unknown name '{name}'{}", did_you_mean(suggestion.as_deref()))]
    UnknownName {
        name: String,
        suggestion: Option<String>,
    },
    #[error("'{name}' is used before it is defined (on line {line}); define it first")]
    ForwardReference { name: String, line: usize },
    #[error("'{name}' (line {line}) could not be constructed, so this cannot be either")]
    DependsOnFailed { name: String, line: usize },
    #[error("'{name}' is already defined on line {line}; a name holds one object")]
    Redefined { name: String, line: usize },
    #[error("'{0}' is the variable of a function and has no value outside one")]
    VariableOutsideFunction(String),

    // Types.
    #[error("{command} expects {expects}; got ({got})")]
    WrongArguments {
        command: &'static str,
        expects: &'static str,
        got: String,
    },
    #[error("cannot {op} {lhs} and {rhs}")]
    WrongOperands {
        op: &'static str,
        lhs: &'static str,
        rhs: &'static str,
    },
    #[error("expected {expected}, got {got}")]
    WrongType {
        expected: &'static str,
        got: &'static str,
    },
    #[error("{0} needs the name of an existing object as its first argument")]
    NotAnObjectName(&'static str),
    #[error("{0} changes an object and has no value to assign; write it on its own line")]
    NotAssignable(&'static str),
    #[error("'{name}' takes one argument; got {got}")]
    FunctionArity { name: String, got: usize },
    #[error("'{name}' is a {kind}, not a function")]
    NotAFunction { name: String, kind: &'static str },

    // Degenerate constructions.
    #[error("the lines are parallel and do not intersect")]
    ParallelLines,
    #[error("the lines coincide: they meet everywhere, not at one point")]
    SameLine,
    #[error("the circles coincide: they meet everywhere, not at points")]
    SameCircle,
    #[error("the objects do not intersect")]
    NoIntersection,
    #[error("there {}; index {index} does not exist", intersections(*count))]
    IntersectionIndex { index: usize, count: usize },
    #[error("an intersection index is a whole number from 1; got {0}")]
    BadIndex(f64),
    #[error("the three points are collinear: no circle passes through them")]
    Collinear,
    #[error("the points coincide: {0}")]
    CoincidentPoints(&'static str),
    #[error("the lines are parallel: they make no angle at a point")]
    ParallelNoAngle,
    #[error("the direction is the zero vector")]
    ZeroDirection,
    #[error("a circle's radius must be positive; got {0}")]
    BadRadius(f64),
    #[error(
        "the value is not a finite number (a division by zero, or the square root or logarithm of a negative number?)"
    )]
    NotFinite,
    #[error("a coordinate or radius is beyond ±{0}")]
    OutOfRange(f64),
    #[error("a text is longer than {0} characters")]
    TextTooLong(usize),
    #[error(
        "unknown colour '{0}': use one of black, gray, red, orange, yellow, green, teal, blue, purple, magenta, brown, or \"#rrggbb\""
    )]
    BadColor(String),
    #[error("the function is too large to draw (more than {0} operations per value)")]
    FunctionTooLarge(usize),
    #[error(
        "the script's functions together are too large to draw (more than {0} operations per value)"
    )]
    FunctionsTooLarge(usize),
}

/// The language of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl ErrorKind {
    /// What is wrong, in `lang` (`Display` is English).
    pub fn message(&self, lang: Lang) -> String {
        match lang {
            Lang::En => self.to_string(),
            Lang::Zh => crate::zh::message(self),
        }
    }
}

fn did_you_mean(suggestion: Option<&str>) -> String {
    suggestion
        .map(|s| format!("; did you mean '{s}'?"))
        .unwrap_or_default()
}

fn unknown_command(name: &str, suggestion: Option<&str>, alternative: Option<&str>) -> String {
    match (suggestion, alternative) {
        (Some(s), _) => format!("unknown command '{name}'; did you mean '{s}'?"),
        (None, Some(how)) => {
            format!("the command '{name}' is not supported; build it as {how}")
        }
        (None, None) => {
            let known: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
            format!("unknown command '{name}' (supported: {})", known.join(", "))
        }
    }
}

fn intersections(count: usize) -> String {
    match count {
        1 => "is only 1 intersection point".into(),
        n => format!("are only {n} intersection points"),
    }
}

/// An error at a place in the script.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct GeoError {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// The command's text, as written.
    pub command: String,
    pub kind: ErrorKind,
}

impl GeoError {
    /// An error from evaluation (the construction is degenerate or a name or type is wrong),
    /// as opposed to one from reading the text.
    pub fn is_evaluation(&self) -> bool {
        !matches!(
            self.kind,
            ErrorKind::UnexpectedChar(_)
                | ErrorKind::BadNumber(_)
                | ErrorKind::NameTooLong(_)
                | ErrorKind::UnterminatedText
                | ErrorKind::LineTooLong(_)
                | ErrorKind::TooDeep(_)
                | ErrorKind::TooManyCommands(_)
                | ErrorKind::Unexpected { .. }
                | ErrorKind::UnexpectedEnd { .. }
                | ErrorKind::UnknownCommand { .. }
                | ErrorKind::Reserved(_)
        )
    }
}

/// Commands quoted in errors are cut to this many characters.
const QUOTED_CHARS: usize = 120;

impl GeoError {
    /// The command as an error quotes it: cut to [`QUOTED_CHARS`] characters, with `…`.
    pub fn quoted_command(&self) -> String {
        let mut quoted: String = self.command.chars().take(QUOTED_CHARS).collect();
        if self.command.chars().count() > QUOTED_CHARS {
            quoted.push('…');
        }
        quoted
    }
}

impl fmt::Display for GeoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {} (`{}`): {}",
            self.line,
            self.column,
            self.quoted_command(),
            self.kind
        )
    }
}
