//! `deepsolve solve --image` through the real binary and the mock model: the image reaches a
//! model that sees as an `image_url` part (scaled to 2 048 px) and the answer comes from it;
//! a model that cannot see, or a file that is not a usable image, is refused with one line
//! naming why before any model call of the turn.

use std::path::{Path, PathBuf};

use deepsolve_testkit::images::{Triangle, png_bomb, see};
use deepsolve_testkit::policy::answered_angle;
use deepsolve_testkit::*;
use serde_json::Value;

use crate::support::Isolated as Env;

const PROBLEM: &str = "Find angle C.";

/// A right triangle wider than the model is sent, so the CLI scales it down.
fn triangle() -> Triangle {
    Triangle::right(2600, 300)
}

fn write(env: &Env, name: &str, bytes: &[u8]) -> PathBuf {
    let path = env.path().join(name);
    std::fs::write(&path, bytes).expect("fixture file");
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn solve(env: &Env, server: &MockServer, args: &[&str], images: &[&Path]) -> Run {
    let mut cmd = env.command();
    cmd.args([
        "solve",
        "--base-url",
        &server.url(),
        "--model",
        "mock-model",
    ]);
    cmd.args(args);
    for image in images {
        cmd.arg("--image").arg(image);
    }
    cmd.arg(PROBLEM);
    let out = cmd.output().expect("run deepsolve");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The messages that carry images, with them: `(index, images)`.
fn with_images(request: &CapturedRequest) -> Vec<(usize, Vec<deepsolve_core::TurnImage>)> {
    request
        .images()
        .into_iter()
        .enumerate()
        .filter(|(_, images)| !images.is_empty())
        .collect()
}

#[test]
fn a_model_that_sees_gets_the_image_and_answers_from_it() {
    let env = Env::new();
    let server = MockServer::policy(Vision);
    let image = write(&env, "triangle.png", &triangle().png());
    let run = solve(&env, &server, &["--set", "llm.vision=true"], &[&image]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    server.assert_clean();
    let requests = server.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        // The problem (message 1, after the system prompt) carries the one image, scaled.
        let images = with_images(request);
        assert_eq!(images.len(), 1, "{:?}", request.body["messages"][1]);
        let (at, sent) = &images[0];
        assert_eq!((*at, sent.len()), (1, 1));
        assert_eq!((sent[0].mime.as_str(), sent[0].width), ("image/png", 2048));
        let text = request.body["messages"][1]["content"][1]["text"].as_str();
        assert!(text.is_some_and(|t| t.starts_with(PROBLEM)), "{text:?}");
    }
    let system = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("`image_1`: triangle.png (2048×236)"),
        "{system}"
    );
    // The answer was read off the pixels the model was sent.
    let seen = see(&requests[0].images()[1][0].bytes).expect("decodes");
    let measured = format!("Angle C ≈ {:.1}°", seen.angle_c().expect("vertices"));
    assert!(run.stdout.contains(&measured), "{}", run.stdout);
    let drawn: f64 = triangle().angle_c();
    assert!((seen.angle_c().unwrap_or_default() - drawn).abs() < 1.0);
    assert!(
        run.stdout.contains("a 2048×236 image, mostly white"),
        "{}",
        run.stdout
    );
}

#[test]
fn auto_probes_once_then_the_turn_sees_in_chinese_and_through_tags() {
    let env = Env::new();
    let server = MockServer::policy(Vision);
    let image = write(&env, "三角形.jpg", &Triangle::right(400, 300).jpeg());
    let run = solve(
        &env,
        &server,
        &["--lang", "zh", "--protocol", "tags", "--json"],
        &[&image],
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    server.assert_clean();
    let requests = server.requests();
    // The probe: no tools, the probe question, one small image, in the turn's language.
    let probe = &requests[0];
    assert!(!probe.offers_tools());
    assert!(
        probe.body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("颜色")
    );
    assert_eq!(with_images(probe)[0].1[0].width, 64);
    // The turn: tags mode, the JPEG untouched (it is small), the section in Chinese.
    let original = Triangle::right(400, 300).jpeg();
    for request in &requests[1..] {
        assert!(
            request.body.get("tools").is_none(),
            "tags: tools in the prompt"
        );
        let images = with_images(request);
        assert_eq!(images.len(), 1);
        assert_eq!(&images[0].1[0].bytes[..], &original[..]);
        assert_eq!(images[0].1[0].mime, "image/jpeg");
    }
    let system = requests[1].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("# 图片") && system.contains("三角形.jpg（400×300）"),
        "{system}"
    );
    let answer = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "answer")
        .expect("an answer event");
    let text = answer["text"].as_str().unwrap_or_default();
    let drawn = Triangle::right(400, 300).angle_c();
    assert!((answered_angle(text) - drawn).abs() < 1.0, "{text}");
}

#[test]
fn a_model_that_cannot_see_is_refused_before_the_turn() {
    let env = Env::new();
    let image = write(&env, "triangle.png", &Triangle::right(200, 200).png());
    // Said by the setting: no model call at all.
    let server = MockServer::policy(Vision);
    let run = solve(&env, &server, &["--set", "llm.vision=false"], &[&image]);
    assert_eq!(run.code, 1, "stdout: {}", run.stdout);
    let line = run.stderr.trim();
    assert!(
        line.starts_with("error: this turn has images, but nothing can see them: the model 'mock-model' cannot see images (llm.vision is false)"),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1, "{line}");
    assert_eq!(server.call_count(), 0);
    // Found by the probe: one call (the probe), none of the turn.
    let blind = MockServer::policy(WellBehaved::new(1));
    let run = solve(&env, &blind, &[], &[&image]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("cannot see images (asked the colour of a green image"),
        "{}",
        run.stderr
    );
    assert_eq!(blind.call_count(), 1);
    assert!(
        blind.requests()[0].body.get("tools").is_none(),
        "only the probe"
    );
    blind.assert_clean();
}

#[test]
fn files_that_are_not_usable_images_are_named_with_the_problem() {
    let env = Env::new();
    let server = MockServer::policy(Vision);
    let text = write(
        &env,
        "figure.png",
        b"this is a text file with a .png name\n",
    );
    let bomb = write(&env, "bomb.png", &png_bomb(60_000, 60_000));
    let big = env.path().join("big.jpg");
    let file = std::fs::File::create(&big).expect("big file");
    file.set_len(11 * 1024 * 1024).expect("11 MiB");
    let missing = env.path().join("missing.png");
    let cases: [(&Path, String); 4] = [
        (
            &text,
            format!(
                "{}: not a PNG, JPEG, WebP or GIF image (read from its bytes, not its name)",
                text.display()
            ),
        ),
        (
            &bomb,
            format!(
                "{}: 60000×60000 pixels is more than an image may have (50 megapixels)",
                bomb.display()
            ),
        ),
        (
            &big,
            format!(
                "{}: 11 MiB is over the 10 MiB limit for an image",
                big.display()
            ),
        ),
        (&missing, format!("{}: cannot read it:", missing.display())),
    ];
    for (path, expected) in cases {
        let run = solve(&env, &server, &["--set", "llm.vision=true"], &[path]);
        assert_eq!(run.code, 1, "{}", path.display());
        assert!(
            run.stderr.starts_with(&format!("error: {expected}")),
            "{}",
            run.stderr
        );
        assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
    }
    assert_eq!(server.call_count(), 0);
    // One bad file among good ones refuses the turn too.
    let good = write(&env, "ok.png", &Triangle::right(100, 100).png());
    let run = solve(
        &env,
        &server,
        &["--set", "llm.vision=true"],
        &[&good, &text],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("figure.png: not a PNG"),
        "{}",
        run.stderr
    );
    assert_eq!(server.call_count(), 0);
}

/// The bytes of every image the turn requests (not the probe) carried.
fn turn_request_images(requests: &[CapturedRequest]) -> Vec<Vec<u8>> {
    requests
        .iter()
        .filter(|r| r.offers_tools())
        .flat_map(CapturedRequest::images)
        .flatten()
        .map(|image| image.bytes.to_vec())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_resumed_after_a_server_kill_sends_the_same_image() {
    use crate::serve::{read_events, view_when_done};
    use crate::support::Server;
    use std::time::Duration;

    let home = tempfile::tempdir().expect("home");
    let slow = FnPolicy(|req: &PolicyRequest| {
        Reply::delayed(Duration::from_millis(300), Vision.reply(req))
    });
    let mock = MockServer::policy(slow);
    let db = format!("sqlite://{}", home.path().join("images.db").display());
    let mut server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let http = reqwest::Client::new();
    let triangle = Triangle::right(360, 240);
    let form = reqwest::multipart::Form::new()
        .text("request", r#"{"problem": "Find angle C."}"#)
        .part(
            "image",
            reqwest::multipart::Part::bytes(triangle.png()).file_name("triangle.png"),
        );
    let created: Value = http
        .post(server.url("/api/v1/turns"))
        .multipart(form)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let turn = created["turn_id"].as_str().expect("turn id").to_string();
    // Kill once the first step's checkpoint is stored (the image was read by then).
    let events = format!("/api/v1/turns/{turn}/events");
    read_events(&http, &server.url(&events), None, |e| {
        e["type"] == "checkpoint"
    })
    .await;
    server.kill9();
    let before = mock.requests().len();

    let server = Server::start(home.path(), &db, &mock.url(), "node-1");
    let resp = http
        .post(server.url(&format!("/api/v1/turns/{turn}/resume")))
        .send()
        .await
        .expect("resume");
    assert_eq!(resp.status().as_u16(), 202);
    read_events(&http, &server.url(&events), None, |_| false).await;
    let requests = mock.requests();
    let sent_before = turn_request_images(&requests[..before]);
    let sent_after = turn_request_images(&requests[before..]);
    assert!(!sent_before.is_empty() && !sent_after.is_empty());
    for bytes in sent_before.iter().chain(&sent_after) {
        assert_eq!(
            bytes[..],
            triangle.png()[..],
            "the same image before and after"
        );
    }
    let view = view_when_done(&http, &server.url(&format!("/api/v1/turns/{turn}"))).await;
    assert_eq!(view["stop_reason"], "answered", "{view}");
    let answer = view["answer"].as_str().unwrap_or_default();
    assert!(
        (answered_angle(answer) - triangle.angle_c()).abs() < 1.0,
        "{answer}"
    );
    let url = view["images"][0]["url"].as_str().expect("image url");
    let served = http.get(server.url(url)).send().await.expect("image");
    assert_eq!(
        &served.bytes().await.expect("bytes")[..],
        &triangle.png()[..]
    );
    mock.assert_clean();
}

#[test]
fn doctor_says_whether_the_model_sees_images() {
    let env = Env::new();
    let seeing = MockServer::policy(Vision);
    let out = env.doctor(&seeing.url());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("✓ the model sees images (llm.vision: auto)"),
        "{stdout}"
    );
    let blind = MockServer::policy(WellBehaved::new(1));
    let stdout = String::from_utf8_lossy(&env.doctor(&blind.url()).stdout).into_owned();
    assert!(
        stdout.contains("! the model does not see images (asked the colour of a green image"),
        "{stdout}"
    );
    // Said by the setting: no probe.
    let calls = blind.call_count();
    let out = env
        .command()
        .args([
            "doctor",
            "--base-url",
            &blind.url(),
            "--model",
            "mock-model",
        ])
        .args(["--set", "llm.vision=false"])
        .output()
        .expect("doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("! the model is not sent images (llm.vision: false)"),
        "{stdout}"
    );
    let probes = blind.requests()[calls..]
        .iter()
        .filter(|r| r.body["messages"][1]["content"].is_array())
        .count();
    assert_eq!(probes, 0);
}
