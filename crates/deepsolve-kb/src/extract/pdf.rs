//! PDF, parsed in a child process.
//!
//! pdf-extract panics on some fonts and bounds neither time nor memory, so it never runs in the
//! caller's process: [`pdf_child_main`] runs in a child (the `deepsolve-kb-pdf` binary, or the
//! `deepsolve` binary's hidden subcommand) under a wall-clock timeout and an address-space
//! limit, in its own process group so a timeout kills all of it. The child reads the PDF from
//! stdin and writes JSON lines: a header with the page count — checked against the page limit
//! before any page is parsed, so a PDF declaring 10 000 pages costs one parse of its page
//! tree — then one line per page. A child that crashes (a panic aborts it), runs out of time,
//! or exits non-zero is a named error; when `pdftotext` is available it gets a second try
//! under the same limits.

use std::ffi::OsString;
use std::io::{BufWriter, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    ChildCommand, ExtractError, Extracted, Kind, Limits, Markup, Page, check_pages, stem_title,
};

/// Exit code of a child that refused the document by the page limit (after its header line).
const EXIT_TOO_MANY_PAGES: u8 = 3;
/// Exit code of a child that could not read the document.
const EXIT_UNREADABLE: u8 = 1;
/// How much of a child's stderr an error quotes.
const STDERR_TAIL: usize = 2_000;
/// How often the parent looks whether the child has finished.
const POLL: Duration = Duration::from_millis(10);

/// One line of the child's output.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Header {
        pages: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    Page {
        page: u32,
        text: String,
    },
}

pub(super) fn extract(
    name: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extracted, ExtractError> {
    let primary = match &limits.pdf_child {
        Some(child) => run_child(name, bytes, child, limits),
        None => Err(ExtractError::PdfChildMissing {
            name: name.to_owned(),
        }),
    };
    let (pages, title) = match primary {
        Ok(read) if has_text(&read.pages) => (read.pages, read.title),
        // A refusal by the limit is final: the fallback would read the same pages.
        Err(e @ ExtractError::TooManyPages { .. }) => return Err(e),
        // pdf-extract failed, or read no text (fonts it cannot map): pdftotext may do better.
        other => match &limits.pdftotext {
            Some(pdftotext) => match run_pdftotext(name, bytes, pdftotext, limits) {
                Ok(pages) => (pages, other.ok().and_then(|read| read.title)),
                Err(e @ ExtractError::TooManyPages { .. }) => return Err(e),
                // Both failed: the parser's own reason, unless there was no parser at all.
                Err(fallback_error) => match other {
                    Ok(read) => (read.pages, read.title),
                    Err(ExtractError::PdfChildMissing { .. }) => return Err(fallback_error),
                    Err(e) => return Err(e),
                },
            },
            None => other.map(|read| (read.pages, read.title))?,
        },
    };
    Ok(Extracted {
        kind: Kind::Pdf,
        title: title.unwrap_or_else(|| stem_title(name)),
        markup: Markup::Plain,
        pages,
    })
}

/// What the child read: the pages and the title from the document's info dictionary.
struct ChildRead {
    pages: Vec<Page>,
    title: Option<String>,
}

fn has_text(pages: &[Page]) -> bool {
    pages.iter().any(|p| !p.text.trim().is_empty())
}

fn run_child(
    name: &str,
    bytes: &[u8],
    child: &ChildCommand,
    limits: &Limits,
) -> Result<ChildRead, ExtractError> {
    let mut cmd = Command::new(&child.program);
    cmd.args(&child.args)
        .arg("-")
        .arg("--max-pages")
        .arg(limits.max_pages.to_string());
    let done = run_limited(name, cmd, bytes, limits)?;
    // The header comes first, so a refusal by the page limit is read before the exit status.
    let pages = parse_lines(name, &done.stdout, limits.max_pages);
    if let Err(e @ ExtractError::TooManyPages { .. }) = pages {
        return Err(e);
    }
    check_status(name, &done)?;
    pages
}

fn parse_lines(name: &str, stdout: &[u8], max_pages: u32) -> Result<ChildRead, ExtractError> {
    let bad = |reason: String| ExtractError::PdfOutput {
        name: name.to_owned(),
        reason,
    };
    let mut pages = Vec::new();
    let mut title = None;
    for line in stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice(line).map_err(|e| bad(e.to_string()))? {
            Line::Header { pages, title: t } => {
                check_pages(name, pages, max_pages)?;
                title = t.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
            }
            Line::Page { page, text } => pages.push(Page { number: page, text }),
        }
        // The child's own count is not trusted: its output is counted too.
        check_pages(name, pages.len() as u64, max_pages)?;
    }
    Ok(ChildRead { pages, title })
}

fn check_status(name: &str, done: &Finished) -> Result<(), ExtractError> {
    if let Some(signal) = done.status.signal() {
        return Err(ExtractError::PdfCrashed {
            name: name.to_owned(),
            signal,
            stderr: done.stderr.clone(),
        });
    }
    match done.status.code() {
        Some(0) => Ok(()),
        code => Err(ExtractError::PdfFailed {
            name: name.to_owned(),
            code: code.unwrap_or(-1),
            stderr: done.stderr.clone(),
        }),
    }
}

/// `pdftotext -layout`, all pages in one run (it separates them with form feeds), stopped one
/// page past the limit so an enormous document costs no more than that.
fn run_pdftotext(
    name: &str,
    bytes: &[u8],
    program: &std::path::Path,
    limits: &Limits,
) -> Result<Vec<Page>, ExtractError> {
    let mut cmd = Command::new(program);
    cmd.args(["-layout", "-enc", "UTF-8", "-q", "-l"])
        .arg((u64::from(limits.max_pages) + 1).to_string())
        .args(["fd://0", "-"]);
    let done = run_limited(name, cmd, bytes, limits)?;
    check_status(name, &done)?;
    let text = String::from_utf8_lossy(&done.stdout);
    let mut pages: Vec<&str> = text.split('\x0c').collect();
    // Every page ends with a form feed: what follows the last one is not a page.
    if pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    check_pages(name, pages.len() as u64, limits.max_pages)?;
    Ok(pages
        .into_iter()
        .zip(1..)
        .map(|(text, number)| Page {
            number,
            text: text.to_owned(),
        })
        .collect())
}

/// A finished child: its status and what it wrote.
struct Finished {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

/// Runs `cmd` with `input` on stdin, under the PDF limits: RLIMIT_AS, no core file, its own
/// process group, killed (the whole group) at the timeout or when its output passes the cap.
fn run_limited(
    name: &str,
    mut cmd: Command,
    input: &[u8],
    limits: &Limits,
) -> Result<Finished, ExtractError> {
    let memory = limits.pdf_memory_bytes;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits; nothing
    // else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            set_limit(libc::RLIMIT_AS, memory)?;
            set_limit(libc::RLIMIT_CORE, 0)
        });
    }
    let mut child = cmd.spawn().map_err(|source| ExtractError::PdfSpawn {
        name: name.to_owned(),
        source,
    })?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // Text is rarely more than a few times the file; more is a runaway, not a document.
    let output_cap = limits.max_file_bytes.saturating_mul(4).max(16 << 20);
    let overflow = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if let Some(mut stdin) = stdin {
                // A child that stops reading (it failed early) closes the pipe: not our error.
                let _ = stdin.write_all(input);
            }
        });
        let out = scope.spawn(|| read_capped(stdout, output_cap, &overflow));
        let err = scope.spawn(|| read_tail(stderr));
        let status = wait_until(&mut child, limits, &overflow);
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        let status = status.map_err(|waited| match waited {
            Waited::TimedOut => ExtractError::PdfTimeout {
                name: name.to_owned(),
                timeout: limits.pdf_timeout,
            },
            Waited::Stopped => ExtractError::Stopped {
                name: name.to_owned(),
            },
            Waited::Overflow => ExtractError::PdfOutput {
                name: name.to_owned(),
                reason: format!("more than {output_cap} bytes of text"),
            },
            Waited::Io(source) => ExtractError::PdfSpawn {
                name: name.to_owned(),
                source,
            },
        })?;
        Ok(Finished {
            status,
            stdout,
            stderr: tail(&String::from_utf8_lossy(&stderr)),
        })
    })
}

fn set_limit(resource: libc::__rlimit_resource_t, bytes: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: a plain syscall on a stack value.
    if unsafe { libc::setrlimit(resource, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn read_capped(pipe: Option<impl Read>, cap: u64, overflow: &AtomicBool) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(cap.saturating_add(1)).read_to_end(&mut bytes);
    }
    if bytes.len() as u64 > cap {
        overflow.store(true, Ordering::Relaxed);
        bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    }
    bytes
}

/// All of stderr, keeping only its last bytes: a child that writes many warnings must not
/// block on a full pipe, and the end says what failed.
fn read_tail(pipe: Option<impl Read>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else {
        return kept;
    };
    let mut buf = [0u8; 8192];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => return kept,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return kept,
        };
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * STDERR_TAIL {
            kept.drain(..kept.len() - STDERR_TAIL);
        }
    }
}

enum Waited {
    TimedOut,
    Stopped,
    Overflow,
    Io(std::io::Error),
}

/// Waits for the child; at the deadline or on overflow its whole group is killed and reaped.
/// When the leader exits on its own, whatever it left in its group is killed too, before the
/// leader is reaped: a straggler holding the pipes open would block the readers.
fn wait_until(
    child: &mut std::process::Child,
    limits: &Limits,
    overflow: &AtomicBool,
) -> Result<ExitStatus, Waited> {
    let deadline = Instant::now() + limits.pdf_timeout;
    let stopped = || limits.cancel.as_ref().is_some_and(|c| c.is_cancelled());
    loop {
        match has_exited(child) {
            Ok(true) => {
                kill_group(child);
                return child.wait().map_err(Waited::Io);
            }
            Ok(false) => {}
            Err(e) => return Err(Waited::Io(e)),
        }
        let why = if overflow.load(Ordering::Relaxed) {
            Waited::Overflow
        } else if stopped() {
            Waited::Stopped
        } else if Instant::now() >= deadline {
            Waited::TimedOut
        } else {
            std::thread::sleep(POLL);
            continue;
        };
        kill_group(child);
        let _ = child.wait();
        return Err(why);
    }
}

/// Whether the leader has exited, without reaping it, so its group id stays ours to signal.
fn has_exited(child: &std::process::Child) -> std::io::Result<bool> {
    // SAFETY: waitid with WNOWAIT only inspects our own child; the siginfo is ours.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            child.id() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(info.si_pid() != 0)
    }
}

fn kill_group(child: &std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: killpg on our own child's group while the leader is un-reaped (waited on only
        // with WNOWAIT), so the group id cannot belong to anyone else. ESRCH is fine.
        unsafe { libc::killpg(pid, libc::SIGKILL) };
    }
}

/// The last [`STDERR_TAIL`] bytes, cut at a character boundary: the end says what failed.
fn tail(text: &str) -> String {
    let text = text.trim();
    let mut start = text.len().saturating_sub(STDERR_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// The child's entry point: `<file or -> [--max-pages N]`. Reads the PDF, writes a header line
/// with the page count, then one JSON line per page. A panic aborts (so the parent sees a
/// crash, not a half-written success); other failures exit 1 with the reason on stderr.
pub fn pdf_child_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("pdf parser panicked: {info}");
        std::process::abort();
    }));
    match child_run(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(EXIT_UNREADABLE)
        }
    }
}

fn child_run(args: impl IntoIterator<Item = OsString>) -> Result<ExitCode, String> {
    let (source, max_pages) = child_args(args)?;
    let bytes = if source == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("stdin: {e}"))?;
        bytes
    } else {
        std::fs::read(&source).map_err(|e| format!("{}: {e}", source.to_string_lossy()))?
    };
    let mut doc =
        pdf_extract::Document::load_mem(&bytes).map_err(|e| format!("not a readable PDF: {e}"))?;
    if doc.is_encrypted() {
        doc.decrypt("").map_err(|e| format!("encrypted: {e}"))?;
    }
    let pages = doc.get_pages();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let header = Line::Header {
        pages: pages.len() as u64,
        title: info_title(&doc),
    };
    write_line(&mut out, &header)?;
    if pages.len() as u64 > max_pages {
        out.flush().map_err(|e| e.to_string())?;
        return Ok(ExitCode::from(EXIT_TOO_MANY_PAGES));
    }
    for &page in pages.keys() {
        let mut text = String::new();
        let mut output = pdf_extract::PlainTextOutput::new(&mut text);
        pdf_extract::output_doc_page(&doc, &mut output, page)
            .map_err(|e| format!("page {page}: {e}"))?;
        write_line(&mut out, &Line::Page { page, text })?;
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

/// `/Title` of the trailer's `/Info` dictionary, when it is a readable text string.
fn info_title(doc: &pdf_extract::Document) -> Option<String> {
    let info = match doc.trailer.get(b"Info").ok()? {
        pdf_extract::Object::Reference(id) => doc.get_dictionary(*id).ok()?,
        pdf_extract::Object::Dictionary(dict) => dict,
        _ => return None,
    };
    pdf_extract::decode_text_string(info.get(b"Title").ok()?).ok()
}

fn child_args(args: impl IntoIterator<Item = OsString>) -> Result<(OsString, u64), String> {
    let mut args = args.into_iter();
    let source = args
        .next()
        .ok_or("usage: <file.pdf or -> [--max-pages N]")?;
    let mut max_pages = u64::MAX;
    while let Some(arg) = args.next() {
        if arg == "--max-pages" {
            max_pages = args
                .next()
                .and_then(|n| n.to_str()?.parse().ok())
                .ok_or("--max-pages needs a number")?;
        } else {
            return Err(format!("unknown argument {}", arg.to_string_lossy()));
        }
    }
    Ok((source, max_pages))
}

fn write_line(out: &mut impl Write, line: &Line) -> Result<(), String> {
    serde_json::to_writer(&mut *out, line).map_err(|e| e.to_string())?;
    out.write_all(b"\n").map_err(|e| e.to_string())
}
