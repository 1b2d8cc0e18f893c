//! `deepsolve kb …` and `deepsolve solve --kb/--attach` through the real binary on the default
//! SQLite store, the real PDF child and index, against the mock model citing what it read.

use deepsolve_testkit::policy::KbCite;
use deepsolve_testkit::{MockServer, documents};
use serde_json::Value;

use crate::support::Isolated as Env;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

fn kb(env: &Env, args: &[&str]) -> Run {
    let out = env
        .command()
        .arg("kb")
        .args(args)
        .output()
        .expect("run deepsolve kb");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_knowledge_base_is_created_listed_shown_and_removed() {
    let env = Env::new();
    let created = kb(&env, &["create", "notes", "--json"]).ok().json();
    assert_eq!(created["name"], "notes");
    assert_eq!(created["documents"], 0);
    let id = created["id"].as_str().expect("an id").to_string();

    let again = kb(&env, &["create", "notes"]);
    assert_ne!(again.code, 0);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);

    let listed = kb(&env, &["list", "--json"]).ok().json();
    let names: Vec<&str> = listed["knowledge_bases"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes"]);
    let text = kb(&env, &["list"]).ok().stdout;
    assert!(
        text.contains("notes") && text.contains("0 documents"),
        "{text}"
    );

    // By name or by id.
    for key in ["notes", id.as_str()] {
        let shown = kb(&env, &["show", key, "--json"]).ok().json();
        assert_eq!(shown["kb"]["id"], id.as_str());
        assert_eq!(shown["documents"], Value::Array(Vec::new()));
    }

    let removed = kb(&env, &["remove", "notes"]).ok();
    assert!(removed.stdout.contains("removed knowledge base 'notes'"));
    let listed = kb(&env, &["list", "--json"]).ok().json();
    assert_eq!(listed["knowledge_bases"], Value::Array(Vec::new()));
}

#[test]
fn an_unknown_knowledge_base_is_an_error_listing_the_users_own() {
    let env = Env::new();
    let none = kb(&env, &["show", "physics"]);
    assert_ne!(none.code, 0);
    assert!(
        none.stderr.contains("unknown knowledge base 'physics'")
            && none.stderr.contains("deepsolve kb create"),
        "{}",
        none.stderr
    );
    kb(&env, &["create", "notes"]).ok();
    kb(&env, &["create", "algebra"]).ok();
    let unknown = kb(&env, &["remove", "physics"]);
    assert_ne!(unknown.code, 0);
    assert!(
        unknown
            .stderr
            .contains("unknown knowledge base 'physics' (yours: algebra, notes)"),
        "{}",
        unknown.stderr
    );
    let no_doc = kb(&env, &["remove", "notes", "lecture.pdf"]);
    assert_ne!(no_doc.code, 0);
    assert!(
        no_doc
            .stderr
            .contains("no document 'lecture.pdf' in 'notes'"),
        "{}",
        no_doc.stderr
    );
}

#[test]
fn each_user_sees_only_their_own_knowledge_bases() {
    let env = Env::new();
    let unknown = kb(&env, &["list", "--user", "alice"]);
    assert_ne!(unknown.code, 0);
    assert!(
        unknown.stderr.contains("no user named 'alice'"),
        "{}",
        unknown.stderr
    );
    let added = env
        .command()
        .args(["users", "add", "alice"])
        .output()
        .expect("users add");
    assert!(added.status.success());
    kb(&env, &["create", "algebra", "--user", "alice"]).ok();
    kb(&env, &["create", "notes"]).ok();
    let names = |run: Run| -> Vec<String> {
        run.ok().json()["knowledge_bases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(kb(&env, &["list", "--json", "--user", "alice"])),
        ["algebra"]
    );
    assert_eq!(names(kb(&env, &["list", "--json"])), ["notes"]);
    // Another user's KB reads as missing, even by its exact name.
    let theirs = kb(&env, &["show", "algebra"]);
    assert_ne!(theirs.code, 0);
    assert!(
        theirs.stderr.contains("(yours: notes)"),
        "{}",
        theirs.stderr
    );
}

/// A knowledge base `notes` holding `lecture.pdf` (five pages, one topic each: page 4 is
/// "Taylor series"), added through `deepsolve kb add`.
fn notes_with_lecture(env: &Env) {
    kb(env, &["create", "notes"]).ok();
    notes_with_lecture_in(env, "notes");
}

/// `lecture.pdf` added to the existing KB `name`.
fn notes_with_lecture_in(env: &Env, name: &str) {
    let lecture = env.path().join("lecture.pdf");
    std::fs::write(&lecture, documents::text_pdf(5)).unwrap();
    kb(env, &["add", name, lecture.to_str().unwrap()]).ok();
}

#[test]
fn documents_are_added_with_progress_and_a_bad_one_fails_alone() {
    let env = Env::new();
    kb(&env, &["create", "notes"]).ok();
    let lecture = env.path().join("lecture.pdf");
    std::fs::write(&lecture, documents::text_pdf(5)).unwrap();
    let broken = env.path().join("broken.pdf");
    std::fs::write(&broken, documents::malformed_pdf()).unwrap();
    let missing = env.path().join("missing.md");
    let run = kb(
        &env,
        &[
            "add",
            "notes",
            broken.to_str().unwrap(),
            lecture.to_str().unwrap(),
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(
        run.code, 1,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    assert!(
        run.stdout
            .contains("added lecture.pdf to 'notes' (5 pages)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("lecture.pdf: ready (5/5 pages)"),
        "progress: {}",
        run.stderr
    );
    let broken_line = format!("error: {}: ", broken.display());
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with(&broken_line))
        .unwrap_or_else(|| panic!("no {broken_line:?} in {}", run.stderr));
    assert!(line.len() > broken_line.len() + 3, "a reason: {line}");
    assert!(
        run.stderr
            .contains(&format!("error: {}: no such file", missing.display())),
        "{}",
        run.stderr
    );

    let shown = kb(&env, &["show", "notes", "--json"]).ok().json();
    assert_eq!(shown["kb"]["ready"], 1);
    assert_eq!(shown["kb"]["failed"], 1);
    let docs = shown["documents"].as_array().unwrap();
    let by_name = |name: &str| docs.iter().find(|d| d["name"] == name).unwrap();
    assert_eq!(by_name("lecture.pdf")["status"], "ready");
    assert_eq!(by_name("lecture.pdf")["pages"], 5);
    assert_eq!(by_name("broken.pdf")["status"], "failed");
    assert!(
        by_name("broken.pdf")["error"]
            .as_str()
            .unwrap()
            .starts_with("broken.pdf: "),
        "{shown}"
    );
    let text = kb(&env, &["show", "notes"]).ok().stdout;
    assert!(text.contains("failed: broken.pdf: "), "{text}");

    // The failed one can be removed alone; the good one stays searchable.
    kb(&env, &["remove", "notes", "broken.pdf"]).ok();
    let listed = kb(&env, &["list", "--json"]).ok().json();
    assert_eq!(listed["knowledge_bases"][0]["documents"], 1);
}

#[test]
fn search_finds_the_page_that_answers() {
    let env = Env::new();
    notes_with_lecture(&env);
    let found = kb(
        &env,
        &["search", "notes", "Taylor series", "-k", "2", "--json"],
    )
    .ok()
    .json();
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 2, "{found}");
    assert_eq!(hits[0]["title"], "lecture.pdf");
    assert_eq!(hits[0]["page"], 4);
    assert!(hits[0]["text"].as_str().unwrap().contains("Taylor series"));
    let text = kb(&env, &["search", "notes", "Taylor series"]).ok().stdout;
    assert!(text.starts_with("[1] lecture.pdf, p. 4"), "{text}");

    // The search built this machine's index; removing the KB removes it too.
    let id = kb(&env, &["show", "notes", "--json"]).ok().json()["kb"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let index = env.data().join("deepsolve/kb-index").join(&id);
    assert!(index.is_dir(), "no index at {}", index.display());
    kb(&env, &["remove", "notes"]).ok();
    assert!(!index.exists(), "the index of a removed KB stays");
}

/// `deepsolve solve` against the mock running `kb-cite`, with `extra` flags; stdout.
fn solve_citing(env: &Env, server: &MockServer, extra: &[&str]) -> Run {
    let out = env
        .command()
        .args([
            "solve",
            "--base-url",
            &server.url(),
            "--model",
            "mock-model",
        ])
        .args(extra)
        .arg("Taylor series")
        .output()
        .expect("run deepsolve solve");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_solve_over_a_knowledge_base_cites_the_file_and_page() {
    let env = Env::new();
    notes_with_lecture(&env);
    let server = MockServer::policy(KbCite);
    let run = solve_citing(&env, &server, &["--kb", "notes"]).ok();
    server.assert_clean();
    let out = &run.stdout;
    // What each knowledge tool found, under its line (progress, on stderr), then the answer
    // citing it with its Sources list (stdout).
    assert!(
        run.stderr.contains("▸ [1] lecture.pdf, p. 4"),
        "{}",
        run.stderr
    );
    assert!(out.contains("By the notes' definition [1]"), "{out}");
    let sources = out
        .split_once("Sources:\n")
        .unwrap_or_else(|| panic!("no Sources list: {out}"))
        .1;
    assert!(
        sources.lines().next().unwrap().trim() == "- [1] lecture.pdf, p. 4",
        "{sources}"
    );

    // The same turn as events: the answer carries the sources it cites.
    let json = solve_citing(&env, &server, &["--kb", "notes", "--json"]).ok();
    let answer: Value = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "answer")
        .expect("an answer event");
    assert_eq!(answer["sources"][0]["n"], 1);
    assert_eq!(answer["sources"][0]["title"], "lecture.pdf");
    assert_eq!(answer["sources"][0]["page"], 4);
}

#[test]
fn an_attached_file_is_read_for_the_turn_and_cited() {
    let env = Env::new();
    let lecture = env.path().join("lecture.pdf");
    std::fs::write(&lecture, documents::text_pdf(5)).unwrap();
    let server = MockServer::policy(KbCite);
    let run = solve_citing(&env, &server, &["--attach", lecture.to_str().unwrap()]).ok();
    server.assert_clean();
    assert!(
        run.stderr.contains("lecture.pdf: extracting"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("[1] lecture.pdf, p. 4"),
        "{}",
        run.stdout
    );
    // The turn's attachments are not a knowledge base of the user's.
    let listed = kb(&env, &["list", "--json"]).ok().json();
    assert_eq!(listed["knowledge_bases"], Value::Array(Vec::new()));

    let broken = env.path().join("broken.pdf");
    std::fs::write(&broken, documents::malformed_pdf()).unwrap();
    let server = MockServer::policy(KbCite);
    let failed = solve_citing(&env, &server, &["--attach", broken.to_str().unwrap()]);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert!(
        failed
            .stderr
            .contains(&format!("error: {}: ", broken.display())),
        "{}",
        failed.stderr
    );
    assert!(
        server.requests().is_empty(),
        "no model call for a failed attachment"
    );
}

#[test]
fn a_solve_over_an_unknown_knowledge_base_lists_the_users_own() {
    let env = Env::new();
    kb(&env, &["create", "notes"]).ok();
    let server = MockServer::policy(KbCite);
    let run = solve_citing(&env, &server, &["--kb", "physics"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("unknown knowledge base 'physics' (yours: notes)"),
        "{}",
        run.stderr
    );
    assert!(
        server.requests().is_empty(),
        "no model call for an unknown KB"
    );
}

#[test]
fn the_hidden_pdf_child_reads_a_pdf_on_stdin() {
    use std::io::Write;
    use std::process::Stdio;
    let env = Env::new();
    let mut child = env
        .std_command()
        .args(["__pdf-child", "-", "--max-pages", "10"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the PDF child");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&documents::text_pdf(3))
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["pages"], 3);
    assert_eq!(lines.len(), 4, "a header and three pages: {lines:?}");
    assert!(lines[3]["text"].as_str().unwrap().contains("Page 3"));
}

#[test]
fn hostile_documents_are_refused_by_name_and_the_store_keeps_serving() {
    let env = Env::new();
    kb(&env, &["create", "notes"]).ok();
    let files: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "huge.pdf",
            documents::many_pages_pdf(10_000),
            "10000 pages is over the limit of 2000",
        ),
        ("bomb.docx", documents::bomb_docx(300 << 20), "zip bomb"),
        ("fake.pdf", b"hello, I am text".to_vec(), "not a PDF"),
        ("big.md", vec![b'a'; 5 << 20], "over the limit of 3 MiB"),
    ];
    let mut args = vec!["add".to_string(), "notes".to_string()];
    for (name, bytes, _) in &files {
        let path = env.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        args.push(path.display().to_string());
    }
    args.extend(["--set".to_string(), "kb.max_file_mb=3".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = kb(&env, &args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    for (name, _, why) in &files {
        let path = env.path().join(name);
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("error: {}: ", path.display())))
            .unwrap_or_else(|| panic!("no error for {name}: {}", run.stderr));
        assert!(line.contains(why), "{line}");
    }
    // Nothing half-read is searchable, and the KB still takes a good document.
    let shown = kb(&env, &["show", "notes", "--json"]).ok().json();
    assert_eq!(shown["kb"]["ready"], 0, "{shown}");
    notes_with_lecture_in(&env, "notes");
    let found = kb(&env, &["search", "notes", "Taylor series", "--json"])
        .ok()
        .json();
    assert_eq!(found["hits"][0]["page"], 4);
}
