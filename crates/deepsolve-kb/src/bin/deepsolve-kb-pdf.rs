//! The PDF parser's child process: see `deepsolve_kb::extract::pdf_child_main`.

fn main() -> std::process::ExitCode {
    deepsolve_kb::extract::pdf_child_main(std::env::args_os().skip(1))
}
