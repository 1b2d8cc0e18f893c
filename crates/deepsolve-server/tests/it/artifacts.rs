//! Artifacts as the web UI reaches them: stored as their call ends, so the live `tool_result`
//! event names each stored copy (`id`, `url`); `…/inline` shows a verified raster image or a
//! figure we drew (`geogebra_analysis`'s SVG, its hash checked), and refuses everything else
//! (HTML, an SVG from the workspace, an SVG whose bytes are not what we drew) with 415.

use std::sync::Arc;

use async_trait::async_trait;
use deepsolve_core::{Tool, ToolContext, ToolError, ToolOutput, ToolRef, ToolSpec};
use deepsolve_protocol::Artifact;
use deepsolve_store::Role;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};

use crate::support::{HOSTILE_HTML, Options, query_tool_spec, start};

/// A 1×1 PNG.
pub(crate) const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\xdac\xf8\xcf\xc0\xf0\x1f\0\x05\0\x02\x01\xa2\xdd[^\0\0\0\0IEND\xaeB`\x82";
const SVG: &str = "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>";

/// Writes a PNG, an HTML page and an SVG (each claiming to be an image) into the workspace,
/// and a scripting SVG reported with the hash of another (as if model code had replaced our
/// figure after it was written).
pub(crate) struct MakeFigures {
    spec: ToolSpec,
}

pub(crate) fn make_figures() -> ToolRef {
    Arc::new(MakeFigures {
        spec: query_tool_spec("make_figures", "Draws figures."),
    })
}

#[async_trait]
impl Tool for MakeFigures {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, _args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let dir = ctx
            .workspace
            .as_ref()
            .ok_or_else(|| ToolError::internal("no workspace"))?;
        let not_this = Some(deepsolve_protocol::sha256_hex(b"<svg/>"));
        let files: [(&str, &[u8], &str, Option<String>); 4] = [
            ("plot.png", PNG, "image/png", None),
            ("page.html", HOSTILE_HTML.as_bytes(), "image/png", None),
            ("figure.svg", SVG.as_bytes(), "image/svg+xml", None),
            ("forged.svg", SVG.as_bytes(), "image/svg+xml", not_this),
        ];
        let mut out = ToolOutput::ok("drew four figures");
        for (name, bytes, mime, rendered_sha256) in files {
            std::fs::write(dir.join(name), bytes)
                .map_err(|e| ToolError::internal(e.to_string()))?;
            out.artifacts.push(Artifact {
                path: name.into(),
                size: bytes.len() as u64,
                mime: mime.into(),
                id: None,
                url: None,
                rendered_sha256,
            });
        }
        Ok(out)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_tool_result_names_stored_copies_and_only_raster_images_show_inline() {
    let started = start(
        WellBehaved::new(1).with_work_tool(Some("make_figures")),
        Options {
            users: vec![("alice", Role::User), ("bob", Role::User)],
            tools: vec![make_figures()],
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let (alice, bob) = (
        Some(started.tokens[0].as_str()),
        Some(started.tokens[1].as_str()),
    );
    let (turn, _) = s
        .start_turn(
            json!({"problem": "plot it", "tools": ["make_figures"]}),
            alice,
        )
        .await;
    let events = s.events(&turn, None, alice).await;
    let result = events
        .iter()
        .find(|e| e.kind() == "tool_result" && e.data["name"] == "make_figures")
        .expect("the tool's result");
    let artifacts = result.data["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 4);
    let url_of = |path: &str| {
        let artifact = artifacts
            .iter()
            .find(|a| a["path"] == path)
            .unwrap_or_else(|| panic!("{path} missing"));
        let id = artifact["id"].as_str().expect("an id in the live event");
        let url = artifact["url"].as_str().expect("a url in the live event");
        assert_eq!(url, format!("/api/v1/artifacts/{id}"));
        url.to_string()
    };

    let png = url_of("plot.png");
    let resp = s
        .http
        .get(s.url(&format!("{png}/inline")))
        .bearer_auth(&started.tokens[0])
        .send()
        .await
        .expect("inline");
    assert_eq!(resp.status().as_u16(), 200);
    let h = resp.headers().clone();
    assert_eq!(h["content-type"], "image/png");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["content-security-policy"], "sandbox; default-src 'none'");
    assert_eq!(&resp.bytes().await.expect("body")[..], PNG);

    // HTML claiming to be a PNG, SVG (which can script), and SVG whose bytes do not have the
    // hash its tool recorded: a download, never inline.
    for path in ["page.html", "figure.svg", "forged.svg"] {
        let url = url_of(path);
        let (status, body) = s.get(&format!("{url}/inline"), alice).await;
        assert_eq!(status, 415, "{path}: {body}");
        assert_eq!(body["error"]["code"], "unsupported_media_type");
        assert_eq!(body["error"]["message"], "not an inline image; download it");
        let resp = s
            .http
            .get(s.url(&url))
            .bearer_auth(&started.tokens[0])
            .send()
            .await
            .expect("download");
        assert_eq!(resp.status().as_u16(), 200, "{path} downloads");
        assert!(
            resp.headers()["content-disposition"]
                .to_str()
                .is_ok_and(|d| d.starts_with("attachment;"))
        );
    }
    // Not yours, or not there: 404.
    let (status, _) = s.get(&format!("{png}/inline"), bob).await;
    assert_eq!(status, 404);
    let (status, _) = s.get("/api/v1/artifacts/art_nope/inline", alice).await;
    assert_eq!(status, 404);

    // The turn lists the same stored copies, each once.
    let view = s.wait_done(&turn, alice).await;
    let mut listed: Vec<&str> = (view["artifacts"].as_array().expect("artifacts").iter())
        .filter_map(|a| a["url"].as_str())
        .collect();
    listed.sort_unstable();
    let mut live: Vec<String> = ["plot.png", "page.html", "figure.svg", "forged.svg"]
        .into_iter()
        .map(url_of)
        .collect();
    live.sort_unstable();
    assert_eq!(listed, live);
    started.server.shutdown().await;
}

/// Our own figure (`geogebra_analysis`'s SVG, its hash checked when it was stored) is shown
/// inline as SVG, with no sniffing and a sandboxing CSP; it still downloads as an attachment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_figure_shows_inline_as_svg() {
    let started = start(
        deepsolve_testkit::policy::Geogebra,
        Options {
            users: vec![("alice", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let alice = Some(started.tokens[0].as_str());
    let (turn, _) = s
        .start_turn(
            json!({"problem": deepsolve_testkit::policy::GEOGEBRA_PROBLEM, "tools": ["geogebra_analysis"]}),
            alice,
        )
        .await;
    let events = s.events(&turn, None, alice).await;
    let result = events
        .iter()
        .find(|e| e.kind() == "tool_result" && e.data["name"] == "geogebra_analysis")
        .expect("the tool's result");
    let artifact = &result.data["artifacts"][0];
    assert_eq!(artifact["mime"], "image/svg+xml");
    let url = artifact["url"].as_str().expect("stored as the call ended");
    let hash = artifact["rendered_sha256"]
        .as_str()
        .expect("ours")
        .to_string();
    let resp = s
        .http
        .get(s.url(&format!("{url}/inline")))
        .bearer_auth(&started.tokens[0])
        .send()
        .await
        .expect("inline");
    assert_eq!(resp.status().as_u16(), 200);
    let h = resp.headers().clone();
    assert_eq!(h["content-type"], "image/svg+xml");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["content-security-policy"], "sandbox; default-src 'none'");
    let body = resp.bytes().await.expect("body");
    assert!(body.starts_with(b"<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(deepsolve_protocol::sha256_hex(&body), hash);
    let resp = s
        .http
        .get(s.url(url))
        .bearer_auth(&started.tokens[0])
        .send()
        .await
        .expect("download");
    assert!(
        resp.headers()["content-disposition"]
            .to_str()
            .is_ok_and(|d| d.starts_with("attachment;"))
    );
    s.wait_done(&turn, alice).await;
    started.server.shutdown().await;
}
