//! The bounds a script is held to: model output is untrusted, so nothing it writes can make
//! the parser recurse without end, the evaluator loop for long, or the picture unbounded.

/// Commands in one script.
pub const MAX_COMMANDS: usize = 500;
/// Characters in one command.
pub const MAX_LINE_CHARS: usize = 2_000;
/// Nesting of parentheses, calls and signs in one expression.
pub const MAX_DEPTH: usize = 64;
/// Characters in a name.
pub const MAX_NAME_CHARS: usize = 40;
/// Characters in a text, a caption or a colour.
pub const MAX_TEXT_CHARS: usize = 500;
/// The largest coordinate or radius an object may have.
pub const MAX_COORD: f64 = 1.0e6;
/// Operations to compute one value of a function, counting those of the functions it calls
/// (a chain of functions that each call the previous twice would double at every link).
pub const MAX_FUNCTION_COST: usize = 5_000;
/// Operations per value of all the script's functions together: each is drawn from a few
/// hundred values, so this bounds the drawing's work.
pub const MAX_TOTAL_FUNCTION_COST: usize = 20_000;
