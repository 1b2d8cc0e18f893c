//! A GeoGebra script from a model, on arbitrary text: reading and evaluating never panic;
//! every error is at a real line and column and names its command; every command read prints
//! back to text that reads as the same tree; whatever evaluates renders to well-formed XML
//! with only the renderer's elements and no attribute that runs or loads anything.
#![no_main]

use deepsolve_geometry::svg::ELEMENTS;
use deepsolve_geometry::{RenderOptions, check, parse_script, render_svg};
use libfuzzer_sys::fuzz_target;
use quick_xml::Reader;
use quick_xml::events::Event;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let checked = check(text);
    let lines: Vec<&str> = text.lines().collect();
    for error in &checked.errors {
        assert!(error.line >= 1 && error.line <= lines.len(), "{error}");
        let line = lines[error.line - 1].trim();
        assert_eq!(error.command, line, "the error names its command");
        assert!(error.column >= 1 && error.column <= line.chars().count() + 1, "{error}");
    }
    for command in &checked.commands {
        let printed = command.to_string();
        let again = parse_script(&printed);
        assert!(again.errors.is_empty(), "{printed:?} does not read back: {:?}", again.errors);
        assert!(
            again.commands.len() == 1 && again.commands[0].statement.same_as(&command.statement),
            "{printed:?} reads back as another tree"
        );
    }
    let svg = render_svg(&checked.construction, &RenderOptions::default());
    well_formed_and_safe(&svg);
});

fn well_formed_and_safe(svg: &str) {
    let mut reader = Reader::from_str(svg);
    let mut depth = 0usize;
    let mut roots = 0;
    loop {
        let event = reader.read_event();
        let opens = matches!(event, Ok(Event::Start(_)));
        match event {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                if depth == 0 {
                    roots += 1;
                }
                let name = e.name().as_ref().to_string();
                assert!(ELEMENTS.contains(&name.as_str()), "<{name}>");
                for attr in e.attributes() {
                    let attr = attr.unwrap_or_else(|err| panic!("bad attribute: {err}"));
                    let key = attr.key.as_ref().to_ascii_lowercase();
                    assert!(!key.starts_with("on") && !key.contains("href") && key != "style", "{key}");
                }
                if opens {
                    depth += 1;
                }
            }
            Ok(Event::End(_)) => depth = depth.checked_sub(1).expect("an end tag closes an open element"),
            // Outside the root, XML allows only white space.
            Ok(Event::Text(t)) => assert!(depth > 0 || t.xml10_content().trim().is_empty(), "text outside the root"),
            Ok(Event::GeneralRef(_)) => assert!(depth > 0, "a reference outside the root"),
            Ok(Event::Eof) => break,
            Ok(other) => panic!("unexpected XML content: {other:?}"),
            Err(e) => panic!("not well-formed: {e}\n{svg}"),
        }
    }
    assert_eq!((depth, roots), (0, 1), "one root, every element closed");
}
