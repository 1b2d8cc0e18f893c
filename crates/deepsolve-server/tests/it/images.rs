//! Images in turns over real HTTP: base64 in the JSON and `image` parts of a multipart body,
//! the caps checked as bytes arrive, bad images refused naming the file, a turn nothing can
//! see refused with 422 up front; stored with the turn and served to its owner only; the
//! OpenAI facade's `image_url` parts (data: URLs only), raw and through the real `openai`
//! Python client.

use base64::Engine as _;
use deepsolve_app::images::ImageLimits;
use deepsolve_server::ServerConfig;
use deepsolve_settings::{Settings, Vision as VisionSetting};
use deepsolve_store::Role;
use deepsolve_testkit::images::{Triangle, png_bomb, see, solid_png};
use deepsolve_testkit::policy::answered_angle;
use deepsolve_testkit::{Vision, WellBehaved};
use serde_json::{Value, json};

use crate::openai_facade::python_or_skip;
use crate::support::{Options, TestServer, start};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn settings(vision: VisionSetting) -> Settings {
    let mut settings = Settings::default();
    settings.llm.vision = vision;
    settings
}

/// Two users (alice, mallory), the Vision model, `llm.vision` as given, small image caps.
async fn server(vision: VisionSetting) -> (TestServer, String, String) {
    let config = ServerConfig {
        images: ImageLimits {
            max_bytes: 256 * 1024,
            ..ImageLimits::default()
        },
        ..ServerConfig::default()
    };
    let started = start(
        Vision,
        Options {
            users: vec![("alice", Role::User), ("mallory", Role::User)],
            config: Some(config),
            settings: settings(vision),
            ..Options::default()
        },
    )
    .await;
    let [alice, mallory] = [started.tokens[0].clone(), started.tokens[1].clone()];
    (started.server, alice, mallory)
}

/// The images of the problem message (after the system prompt) of every turn request the
/// mock received (the probe, a request without tools, left out).
fn problem_images(s: &TestServer) -> Vec<Vec<deepsolve_core::TurnImage>> {
    s.mock
        .requests()
        .iter()
        .filter(|r| r.offers_tools())
        .map(|r| r.images().into_iter().nth(1).unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base64_images_reach_the_model_are_stored_with_the_turn_and_shown_to_its_owner() {
    let (s, alice, mallory) = server(VisionSetting::Auto).await;
    let triangle = Triangle::right(400, 300);
    let png = triangle.png();
    let (turn, _) = s
        .start_turn(
            json!({"problem": "Find angle C.", "images": [{"name": "../figs/triangle.png", "data_base64": b64(&png)}]}),
            Some(&alice),
        )
        .await;
    let view = s.wait_done(&turn, Some(&alice)).await;
    assert_eq!(view["stop_reason"], "answered", "{view}");
    let answer = view["answer"].as_str().unwrap_or_default();
    assert!(
        (answered_angle(answer) - triangle.angle_c()).abs() < 1.0,
        "{answer}"
    );
    // The probe came first (auto), then every turn request carried the image untouched.
    let probe = &s.mock.requests()[0].body;
    assert!(probe.get("tools").is_none(), "{probe}");
    let sent = problem_images(&s);
    assert!(sent.len() >= 3);
    assert!(
        sent.iter()
            .all(|images| images.len() == 1 && images[0].bytes[..] == png[..])
    );
    s.mock.assert_clean();

    let image = &view["images"][0];
    assert_eq!(
        (
            &image["id"],
            &image["name"],
            &image["mime"],
            &image["width"],
            &image["height"]
        ),
        (
            &json!("image_1"),
            &json!("triangle.png"),
            &json!("image/png"),
            &json!(400),
            &json!(300)
        )
    );
    let url = image["url"].as_str().expect("url");
    assert_eq!(url, format!("/api/v1/turns/{turn}/images/image_1"));
    let resp = s
        .http
        .get(s.url(url))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status().as_u16(), 200);
    let header = |name: &str| {
        resp.headers()[name]
            .to_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(header("content-type"), "image/png");
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert!(header("content-security-policy").contains("sandbox"));
    assert_eq!(&resp.bytes().await.expect("bytes")[..], &png[..]);
    // Another user's image is as missing as an unknown one; the session lists it too.
    let theirs = s
        .http
        .get(s.url(url))
        .bearer_auth(&mallory)
        .send()
        .await
        .expect("get");
    assert_eq!(theirs.status().as_u16(), 404);
    let (_, missing) = s
        .get(
            &format!("/api/v1/turns/{turn}/images/image_9"),
            Some(&alice),
        )
        .await;
    assert_eq!(missing["error"]["code"], "not_found");
    let (_, session) = s
        .get(
            &format!(
                "/api/v1/sessions/{}",
                view["session_id"].as_str().unwrap_or_default()
            ),
            Some(&alice),
        )
        .await;
    assert_eq!(session["turns"][0]["images"][0]["url"], json!(url));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_images_are_capped_as_they_arrive_and_a_bad_one_is_named() {
    let (s, alice, _) = server(VisionSetting::Sees).await;
    let post = |parts: Vec<(&'static str, &'static str, Vec<u8>)>| {
        let mut form = reqwest::multipart::Form::new()
            .text("request", json!({"problem": "Find angle C."}).to_string());
        for (part, name, bytes) in parts {
            form = form.part(part, reqwest::multipart::Part::bytes(bytes).file_name(name));
        }
        let req = s
            .http
            .post(s.url("/api/v1/turns"))
            .bearer_auth(&alice)
            .multipart(form);
        async move {
            let resp = req.send().await.expect("post");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let big = Triangle::right(1800, 600);
    let (status, created) = post(vec![
        ("image", "small.png", solid_png(10, 10, [30, 30, 220])),
        ("image", "wide.jpg", big.jpeg()),
    ])
    .await;
    assert_eq!(status, 201, "{created}");
    let turn = created["turn_id"].as_str().expect("turn").to_string();
    let view = s.wait_done(&turn, Some(&alice)).await;
    let names: Vec<&str> = view["images"]
        .as_array()
        .expect("images")
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(names, ["small.png", "wide.jpg"]);
    let sent = problem_images(&s);
    let first = sent.first().expect("a turn request");
    assert_eq!(first.len(), 2);
    assert_eq!(see(&first[0].bytes).map(|i| i.colour), Some("blue"));
    assert_eq!(first[1].mime, "image/jpeg");

    let calls = s.mock.call_count();
    // Over the cap (256 KiB here): refused with 413 naming it, before the rest arrives.
    let noise: Vec<u8> = (0..300 * 1024u32).map(|i| (i * 7919 % 251) as u8).collect();
    let (status, body) = post(vec![("image", "huge.png", noise)]).await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("huge.png: ")),
        "{body}"
    );
    for (name, bytes, expected) in [
        (
            "notes.png",
            b"Find angle C.\n".to_vec(),
            "notes.png: not a PNG, JPEG, WebP or GIF image",
        ),
        (
            "bomb.png",
            png_bomb(60_000, 60_000),
            "bomb.png: 60000×60000 pixels is more than",
        ),
    ] {
        let (status, body) = post(vec![("image", name, bytes)]).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (422, &json!("invalid_image")),
            "{body}"
        );
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(expected), "{message}");
    }
    let nine = (0..9)
        .map(|_| ("image", "x.png", solid_png(2, 2, [0, 0, 0])))
        .collect();
    let (status, body) = post(nine).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 8 images"))
    );
    // Base64 over the cap is refused from its length, unread.
    let (status, body) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "images": [{"name": "b.png", "data_base64": "A".repeat(400 * 1024)}]}),
            Some(&alice),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (413, &json!("payload_too_large")),
        "{body}"
    );
    let (status, body) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "p", "images": [{"name": "c.png", "data_base64": "%%%"}]}),
            Some(&alice),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("invalid_image")),
        "{body}"
    );
    assert_eq!(
        s.mock.call_count(),
        calls,
        "no refused turn reached the model"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_images_nothing_can_see_is_refused_up_front() {
    let (s, alice, _) = server(VisionSetting::Blind).await;
    let (status, body) = s
        .post(
            "/api/v1/turns",
            json!({"problem": "Find angle C.", "images": [{"name": "t.png", "data_base64": b64(&Triangle::right(100, 100).png())}]}),
            Some(&alice),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("cannot_see_images")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the model 'mock-model' cannot see images (llm.vision is false)"),
        "{message}"
    );
    assert_eq!(s.mock.call_count(), 0);
    let (_, sessions) = s.get("/api/v1/sessions", Some(&alice)).await;
    assert_eq!(sessions["sessions"], json!([]), "nothing was recorded");
    // The same turn without images runs.
    let (turn, _) = s
        .start_turn(json!({"problem": "Find angle C."}), Some(&alice))
        .await;
    let view = s.wait_done(&turn, Some(&alice)).await;
    assert_eq!(view["images"], json!([]));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_takes_data_url_images_and_fetches_no_url() {
    let (s, alice, _) = server(VisionSetting::Sees).await;
    let triangle = Triangle::right(300, 300);
    let data_url = format!("data:image/png;base64,{}", b64(&triangle.png()));
    let (status, body) = s
        .post(
            "/v1/chat/completions",
            json!({"model": "deepsolve", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Find angle C."},
                {"type": "image_url", "image_url": {"url": data_url, "detail": "high"}}
            ]}]}),
            Some(&alice),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        (answered_angle(answer) - triangle.angle_c()).abs() < 1.0,
        "{answer}"
    );
    assert_eq!(problem_images(&s)[0][0].bytes[..], triangle.png()[..]);

    let calls = s.mock.call_count();
    let (status, body) = s
        .post(
            "/v1/chat/completions",
            json!({"model": "deepsolve", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Find angle C."},
                {"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data"}}
            ]}]}),
            Some(&alice),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("invalid_image")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not fetch image URLs"))
    );
    assert_eq!(s.mock.call_count(), calls);
    s.shutdown().await;
}

const IMAGE_CLIENT: &str = r#"
import base64, json, sys
from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0, timeout=60)
png = open(sys.argv[3], "rb").read()
url = "data:image/png;base64," + base64.b64encode(png).decode()
full = client.chat.completions.create(
    model="deepsolve",
    messages=[{"role": "user", "content": [
        {"type": "text", "text": "Find angle C."},
        {"type": "image_url", "image_url": {"url": url}},
    ]}],
)
try:
    client.chat.completions.create(
        model="deepsolve",
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "Find angle C."},
            {"type": "image_url", "image_url": {"url": "https://example.com/triangle.png"}},
        ]}],
    )
    remote = None
except Exception as e:
    remote = [getattr(e, "status_code", None), str(e)]
print(json.dumps({"answer": full.choices[0].message.content, "remote": remote}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_python_client_sends_an_image() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (s, alice, _) = server(VisionSetting::Auto).await;
    let triangle = Triangle::right(320, 240);
    let file = s.dir.path().join("triangle.png");
    std::fs::write(&file, triangle.png()).expect("fixture");
    let out = tokio::process::Command::new(&python)
        .args(["-c", IMAGE_CLIENT, &s.url("/v1"), &alice])
        .arg(&file)
        .output()
        .await
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report json");
    let answer = report["answer"].as_str().unwrap_or_default();
    assert!(
        (answered_angle(answer) - triangle.angle_c()).abs() < 1.0,
        "{report}"
    );
    assert_eq!(report["remote"][0], 422, "{report}");
    assert!(
        report["remote"][1]
            .as_str()
            .is_some_and(|m| m.contains("does not fetch image URLs"))
    );
    s.mock.assert_clean();
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_only_model_still_runs_turns_without_images() {
    // `llm.vision: auto` asks only when a turn has images: a blind model is never probed here.
    let started = start(WellBehaved::new(1).with_work_tool(None), Options::default()).await;
    let s = started.server;
    let (turn, _) = s.start_turn(json!({"problem": "What is 2+2?"}), None).await;
    let view = s.wait_done(&turn, None).await;
    assert_eq!(view["stop_reason"], "answered");
    assert!(
        s.mock
            .requests()
            .iter()
            .all(|r| r.body.get("tools").is_some()),
        "no probe"
    );
    s.shutdown().await;
}
