//! Draws a script: `cargo run -p deepsolve-geometry --example figure < script.ggb > figure.svg`.
//! Errors go to stderr, one per line, the table of objects too.

use std::io::Read;

fn main() -> std::io::Result<()> {
    let mut script = String::new();
    std::io::stdin().read_to_string(&mut script)?;
    let checked = deepsolve_geometry::check(&script);
    for error in &checked.errors {
        eprintln!("{error}");
    }
    eprint!(
        "{}",
        deepsolve_geometry::object_table(&checked.construction, Default::default())
    );
    let svg = deepsolve_geometry::render_svg(&checked.construction, &Default::default());
    print!("{svg}");
    Ok(())
}
