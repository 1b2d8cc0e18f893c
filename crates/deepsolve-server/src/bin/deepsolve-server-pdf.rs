//! The PDF parser's child process (`deepsolve_kb::extract::pdf_child_main`) for a server
//! embedded without the `deepsolve` binary, which is its own child (and for this crate's
//! tests: a test executable cannot be one).

fn main() -> std::process::ExitCode {
    deepsolve_kb::extract::pdf_child_main(std::env::args_os().skip(1))
}
