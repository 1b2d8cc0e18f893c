//! `deepsolve kb …` through the real binary on the default SQLite store: create, list, show,
//! remove, users, and the errors a student meets.

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
        none.stderr.contains("no knowledge base 'physics'")
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
            .contains("no knowledge base 'physics' (yours: algebra, notes)"),
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
