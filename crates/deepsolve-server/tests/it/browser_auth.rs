//! The web UI's sign-in through the real server: login sets a server-side session in an
//! `HttpOnly` cookie, the API and SSE accept it, changes need the server's own `Origin`,
//! logout, expiry and revocation end it; and `GET /api/v1/capabilities`.

use std::time::Duration;

use deepsolve_protocol::api::PriceView;
use deepsolve_server::ServerConfig;
use deepsolve_store::Role;
use deepsolve_testkit::WellBehaved;
use serde_json::{Value, json};

use crate::support::{Options, TestServer, parse_sse, start};

fn solver() -> WellBehaved {
    WellBehaved::new(1).with_work_tool(None)
}

/// A browser: a cookie jar of one cookie, and the page's origin on every request.
struct Browser<'a> {
    s: &'a TestServer,
    cookie: Option<String>,
    origin: Option<String>,
}

impl<'a> Browser<'a> {
    fn new(s: &'a TestServer) -> Self {
        Browser {
            s,
            cookie: None,
            origin: Some(s.base.clone()),
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.s.http.request(method, self.s.url(path));
        if let Some(cookie) = &self.cookie {
            req = req.header("cookie", format!("theme=dark; deepsolve_session={cookie}"));
        }
        if let Some(origin) = &self.origin {
            req = req.header("origin", origin);
        }
        req
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(self.request(reqwest::Method::POST, path).json(&body))
            .await
    }

    /// Sign in; returns the `Set-Cookie` header and the body.
    async fn login(&mut self, token: &str) -> (u16, String, Value) {
        let resp = self
            .request(reqwest::Method::POST, "/api/v1/auth/login")
            .json(&json!({"token": token}))
            .send()
            .await
            .expect("login");
        let status = resp.status().as_u16();
        let set_cookie = resp
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if status == 200 {
            self.cookie = cookie_value(&set_cookie);
        }
        (status, set_cookie, resp.json().await.unwrap_or(Value::Null))
    }
}

fn cookie_value(set_cookie: &str) -> Option<String> {
    set_cookie
        .split(';')
        .next()?
        .trim()
        .strip_prefix("deepsolve_session=")
        .map(str::to_string)
}

fn attributes(set_cookie: &str) -> Vec<String> {
    set_cookie
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_string())
        .collect()
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_signs_in_uses_the_api_and_sse_with_its_cookie_and_signs_out() {
    let started = start(
        solver(),
        Options {
            users: vec![("alice", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let mut browser = Browser::new(s);

    let (status, view) = browser.get("/api/v1/auth/session").await;
    assert_eq!(status, 200);
    assert_eq!(
        view,
        json!({"mode": "tokens", "user": null, "expires_at": null})
    );

    let (status, _, body) = browser.login("dst_not_a_real_token").await;
    assert_eq!((status, code(&body)), (401, "unauthorized"));
    assert!(browser.cookie.is_none());

    let (status, set_cookie, view) = browser.login(&started.tokens[0]).await;
    assert_eq!(status, 200, "{view}");
    let secret = browser.cookie.clone().expect("a session cookie");
    assert!(
        !secret.contains(&started.tokens[0]),
        "the cookie is not the token"
    );
    let attrs = attributes(&set_cookie);
    for want in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(
            attrs.iter().any(|a| a == want),
            "{want} missing: {set_cookie}"
        );
    }
    assert!(
        !attrs.iter().any(|a| a == "Secure"),
        "plain http: {set_cookie}"
    );
    assert_eq!(view["mode"], "tokens");
    assert_eq!(view["user"]["name"], "alice");
    assert_eq!(view["user"]["role"], "user");
    let expires_at = view["expires_at"].as_i64().expect("expires_at");
    let (status, again) = browser.get("/api/v1/auth/session").await;
    assert_eq!(
        (status, again["expires_at"].as_i64()),
        (200, Some(expires_at))
    );

    // The API and the SSE stream, with the cookie only.
    let (status, created) = browser
        .post("/api/v1/turns", json!({"problem": "Solve x + 1 = 2"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let turn = created["turn_id"].as_str().expect("turn_id").to_string();
    let resp = browser
        .request(
            reqwest::Method::GET,
            &format!("/api/v1/turns/{turn}/events"),
        )
        .send()
        .await
        .expect("sse");
    assert_eq!(resp.status().as_u16(), 200);
    let body = tokio::time::timeout(Duration::from_secs(60), resp.text())
        .await
        .expect("the stream ends with the turn")
        .expect("body");
    let events = parse_sse(&body);
    assert_eq!(events.last().map(|e| e.kind()), Some("turn_finished"));
    // Every frame is named by its type, so `EventSource.addEventListener('answer', …)` works.
    for event in &events {
        assert_eq!(
            event.event.as_deref(),
            Some(event.kind()),
            "{:?}",
            event.data
        );
    }
    assert!(body.contains("\nevent: answer\n") || body.starts_with("event: answer\n"));
    let (status, view) = browser.get(&format!("/api/v1/turns/{turn}")).await;
    assert_eq!((status, view["id"].as_str()), (200, Some(turn.as_str())));

    // Logout: the session is gone on the server, the cookie is cleared.
    let resp = browser
        .request(reqwest::Method::POST, "/api/v1/auth/logout")
        .send()
        .await
        .expect("logout");
    assert_eq!(resp.status().as_u16(), 204);
    let cleared = resp.headers()["set-cookie"].to_str().expect("set-cookie");
    assert!(cleared.starts_with("deepsolve_session=;"), "{cleared}");
    assert!(
        attributes(cleared).iter().any(|a| a == "Max-Age=0"),
        "{cleared}"
    );
    for path in ["/api/v1/sessions", &format!("/api/v1/turns/{turn}")] {
        let (status, body) = browser.get(path).await;
        assert_eq!((status, code(&body)), (401, "unauthorized"), "{path}");
    }
    let resp = browser
        .request(
            reqwest::Method::GET,
            &format!("/api/v1/turns/{turn}/events"),
        )
        .send()
        .await
        .expect("sse");
    assert_eq!(resp.status().as_u16(), 401);
    let (_, view) = browser.get("/api/v1/auth/session").await;
    assert_eq!(view["user"], Value::Null);
    started.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_or_revoked_session_is_refused() {
    let started = start(
        solver(),
        Options {
            users: vec![("alice", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let alice = s
        .state
        .store
        .user_by_name("alice")
        .await
        .expect("store")
        .expect("alice");

    let mut browser = Browser::new(s);
    let expired = s
        .state
        .store
        .create_browser_session(&alice.id, Duration::ZERO)
        .await
        .expect("session");
    browser.cookie = Some(expired.secret);
    let (status, body) = browser.get("/api/v1/sessions").await;
    assert_eq!(
        (status, code(&body)),
        (401, "unauthorized"),
        "expired: {body}"
    );

    let (status, _, _) = browser.login(&started.tokens[0]).await;
    assert_eq!(status, 200);
    let (status, _) = browser.get("/api/v1/sessions").await;
    assert_eq!(status, 200);
    let ended = s
        .state
        .store
        .revoke_browser_sessions(&alice.id)
        .await
        .expect("revoke");
    assert_eq!(ended, 1, "the expired one was cleared at the login");
    let (status, body) = browser.get("/api/v1/sessions").await;
    assert_eq!(
        (status, code(&body)),
        (401, "unauthorized"),
        "revoked: {body}"
    );
    started.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_changes_need_the_servers_own_origin_and_bearer_ones_do_not() {
    let config = ServerConfig {
        cors_origins: deepsolve_server::CorsOrigins::parse(&["https://ui.example"])
            .expect("origins"),
        ..ServerConfig::default()
    };
    let started = start(
        solver(),
        Options {
            users: vec![("alice", Role::User)],
            config: Some(config),
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let mut browser = Browser::new(s);

    browser.origin = Some("https://evil.example".into());
    let (status, _, body) = browser.login(&started.tokens[0]).await;
    assert_eq!(
        (status, code(&body)),
        (403, "forbidden"),
        "foreign login: {body}"
    );

    browser.origin = Some(s.base.clone());
    let (status, _, _) = browser.login(&started.tokens[0]).await;
    assert_eq!(status, 200);
    let problem = json!({"problem": "Solve x + 1 = 2"});

    for origin in [None, Some("https://evil.example"), Some("null")] {
        browser.origin = origin.map(str::to_string);
        let (status, body) = browser.post("/api/v1/turns", problem.clone()).await;
        assert_eq!(
            (status, code(&body)),
            (403, "forbidden"),
            "{origin:?}: {body}"
        );
        assert_eq!(body["error"]["message"], "cross-origin request refused");
        let resp = browser
            .request(reqwest::Method::DELETE, "/api/v1/sessions/ses_x")
            .send()
            .await
            .expect("delete");
        assert_eq!(resp.status().as_u16(), 403, "{origin:?}");
    }
    // Reads need no Origin.
    browser.origin = None;
    let (status, _) = browser.get("/api/v1/sessions").await;
    assert_eq!(status, 200);

    for origin in [s.base.clone(), "https://ui.example".to_string()] {
        browser.origin = Some(origin.clone());
        let (status, created) = browser.post("/api/v1/turns", problem.clone()).await;
        assert_eq!(status, 201, "{origin}: {created}");
        let turn = created["turn_id"].as_str().expect("turn");
        s.wait_done(turn, Some(&started.tokens[0])).await;
    }
    // A bearer token is never sent by a browser on its own: no Origin needed.
    let (status, created) = s
        .post("/api/v1/turns", problem.clone(), Some(&started.tokens[0]))
        .await;
    assert_eq!(status, 201, "{created}");
    s.wait_done(
        created["turn_id"].as_str().expect("turn"),
        Some(&started.tokens[0]),
    )
    .await;
    started.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_turn_and_session_are_404s_through_the_cookie() {
    let started = start(
        solver(),
        Options {
            users: vec![("alice", Role::User), ("bob", Role::User)],
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let bob = Some(started.tokens[1].as_str());
    let (turn, session) = s.start_turn(json!({"problem": "bob's"}), bob).await;
    s.wait_done(&turn, bob).await;

    let mut alice = Browser::new(s);
    let (status, _, _) = alice.login(&started.tokens[0]).await;
    assert_eq!(status, 200);
    for path in [
        format!("/api/v1/turns/{turn}"),
        format!("/api/v1/turns/{turn}/events"),
        format!("/api/v1/sessions/{session}"),
    ] {
        let (status, body) = alice.get(&path).await;
        assert_eq!((status, code(&body)), (404, "not_found"), "{path}");
    }
    let (status, _) = alice
        .post(
            "/api/v1/turns",
            json!({"problem": "hijack", "session_id": session}),
        )
        .await;
    assert_eq!(status, 404);
    started.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_is_secure_behind_a_trusted_https_proxy_or_when_configured() {
    for (trust, always, forwarded, secure) in [
        (false, false, Some("https"), false),
        (true, false, Some("https"), true),
        (true, false, Some("http"), false),
        (true, false, None, false),
        (false, true, None, true),
    ] {
        let config = ServerConfig {
            trust_forwarded_proto: trust,
            secure_cookies: always,
            session_ttl: Duration::from_secs(3600),
            ..ServerConfig::default()
        };
        let started = start(
            solver(),
            Options {
                users: vec![("alice", Role::User)],
                config: Some(config),
                ..Options::default()
            },
        )
        .await;
        let s = &started.server;
        let mut req = s
            .http
            .post(s.url("/api/v1/auth/login"))
            .json(&json!({"token": started.tokens[0]}));
        if let Some(proto) = forwarded {
            req = req.header("x-forwarded-proto", proto);
            // Behind the proxy the page's origin has the forwarded scheme.
            req = req.header("origin", s.base.replacen("http", proto, 1));
        }
        let resp = req.send().await.expect("login");
        assert_eq!(resp.status().as_u16(), 200);
        let set_cookie = resp.headers()["set-cookie"].to_str().expect("cookie");
        let attrs = attributes(set_cookie);
        assert_eq!(
            attrs.iter().any(|a| a == "Secure"),
            secure,
            "trust {trust}, always {always}, {forwarded:?}: {set_cookie}"
        );
        assert!(attrs.iter().any(|a| a == "Max-Age=3600"), "{set_cookie}");
        started.server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_user_mode_has_a_local_admin_and_no_sign_in() {
    let s = start(solver(), Options::default()).await.server;
    let (status, view) = s.get("/api/v1/auth/session", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        view,
        json!({"mode": "single_user", "user": {"id": "local", "name": "local", "role": "admin"}, "expires_at": null})
    );
    let (status, body) = s
        .post("/api/v1/auth/login", json!({"token": "dst_x"}), None)
        .await;
    assert_eq!((status, code(&body)), (409, "conflict"));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_list_every_tool_with_why_one_is_unavailable() {
    let config = ServerConfig {
        price: Some(PriceView {
            input_per_mtok: 0.27,
            output_per_mtok: 1.1,
            currency: "USD".into(),
        }),
        max_problem_chars: 5000,
        ..ServerConfig::default()
    };
    let started = start(
        solver(),
        Options {
            users: vec![("alice", Role::User)],
            config: Some(config),
            ..Options::default()
        },
    )
    .await;
    let s = &started.server;
    let (status, body) = s.get("/api/v1/capabilities", None).await;
    assert_eq!((status, code(&body)), (401, "unauthorized"));
    let (status, caps) = s
        .get("/api/v1/capabilities", Some(&started.tokens[0]))
        .await;
    assert_eq!(status, 200, "{caps}");
    assert_eq!(caps["model"], "mock-model");
    assert_eq!(caps["limits"]["max_problem_chars"], 5000);
    assert_eq!(
        caps["limits"]["max_body_bytes"],
        ServerConfig::default().max_body_bytes
    );
    assert_eq!(
        caps["price"],
        json!({"input_per_mtok": 0.27, "output_per_mtok": 1.1, "currency": "USD"})
    );
    // The test server has no sandbox: the code tools cannot be mounted, and say why.
    assert_eq!(caps["sandbox"]["available"], false);
    assert_eq!(caps["sandbox"]["backend"], Value::Null);
    assert!(
        caps["sandbox"]["detail"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    let tools = caps["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {caps}"))
    };
    let code_tool = tool("code_execution");
    assert_eq!(code_tool["available"], false);
    assert_eq!(code_tool["default"], false);
    let why = code_tool["reason"].as_str().expect("a reason");
    assert!(why.starts_with("no sandbox"), "{why}");
    assert!(
        code_tool["description"]
            .as_str()
            .is_some_and(|d| d.contains("computation"))
    );
    let reason = tool("reason");
    assert_eq!(reason["available"], true);
    assert_eq!(reason["reason"], Value::Null);
    assert_eq!(reason["default"], false, "reason is opt-in");
    assert!(
        !reason["description"]
            .as_str()
            .unwrap_or("")
            .starts_with('`')
    );
    started.server.shutdown().await;
}
