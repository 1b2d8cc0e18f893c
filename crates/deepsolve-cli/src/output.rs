//! Writing to stdout and stderr without ever panicking (`println!` panics on a closed pipe).
//!
//! A reader that goes away (`deepsolve solve … | head -1`) closes stdout: from then on output
//! is dropped, and the process exits 0, as `grep`, `rg` and `cat` do ([`stdout_closed`]). Any
//! other failure to write stdout (a full disk under `> answer.md`) is remembered and reported
//! once at exit ([`stdout_failure`]). Progress on stderr is best effort: if stderr is gone,
//! nobody is watching.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDOUT_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// `println!` to stdout that never panics; see the module docs.
macro_rules! outln {
    () => { $crate::output::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` to stderr that never panics.
macro_rules! errln {
    () => { $crate::output::err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::err(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {errln, outln};

/// Write to stdout (flushed: a reader sees each line as it is written).
pub(crate) fn out(args: fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let result = stdout.write_fmt(args).and_then(|()| stdout.flush());
    if let Err(e) = result {
        stdout_failed(&e);
    }
}

/// Write bytes to stdout (a generated file: completions, the man page).
pub(crate) fn out_bytes(bytes: &[u8]) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        stdout_failed(&e);
    }
}

/// Write to stderr, best effort.
pub(crate) fn err(args: fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_fmt(args).and_then(|()| stderr.flush());
}

/// Write prepared bytes to stderr in one go (a redrawn live view), best effort.
pub(crate) fn err_bytes(bytes: &[u8]) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(bytes).and_then(|()| stderr.flush());
}

fn stdout_failed(e: &std::io::Error) {
    STDOUT_CLOSED.store(true, Ordering::Relaxed);
    if e.kind() != ErrorKind::BrokenPipe {
        let mut failure = STDOUT_FAILURE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failure.get_or_insert_with(|| e.to_string());
    }
}

/// Whether stdout's reader went away (or stdout failed): nothing more reaches it.
pub(crate) fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Why stdout could not be written, when that was not its reader leaving.
pub(crate) fn stdout_failure() -> Option<String> {
    STDOUT_FAILURE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}
