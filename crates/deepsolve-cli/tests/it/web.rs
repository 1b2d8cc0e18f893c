//! The web tools through the real binary, on a web that has public addresses: a private
//! network namespace (`unshare -rn`, no privileges needed) whose loopback carries two public
//! addresses, where `deepsolve-webfixture` serves a Brave-shaped search API and pages, and
//! `deepsolve-mock` plays the model (`web-cite`). The binary's egress guard is the shipped
//! one — no test switch: the fetches pass because the addresses are public, and the redirect
//! to the cloud metadata address is refused because it is not.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Isolated;

/// Public addresses, put on the namespace's loopback (nothing leaves the namespace).
const SEARCH_HOST: &str = "93.184.216.34";
const ARTICLE_HOST: &str = "151.101.2.1";
const MOCK_PORT: u16 = 18080;
const BRAVE_KEY: &str = "brave-key-e2e-7f3a";

/// A binary built beside `deepsolve` (the workspace's `cargo test` builds the testkit's).
fn sibling_binary(name: &str) -> PathBuf {
    let deepsolve = PathBuf::from(assert_cmd::cargo::cargo_bin!("deepsolve"));
    let path = deepsolve.with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p deepsolve-testkit --bins`",
        path.display()
    );
    path
}

/// The script the namespace runs: its network, the web and the model, then one solve.
fn script(dir: &Path, problem: &str) -> String {
    let deepsolve = PathBuf::from(assert_cmd::cargo::cargo_bin!("deepsolve"));
    let mock = sibling_binary("deepsolve-mock");
    let fixture = sibling_binary("deepsolve-webfixture");
    let d = dir.display();
    format!(
        r#"set -eu
# The web and the model stop with the script, whichever way it ends (left running, they
# outlived the test in their orphaned namespace).
trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT
ip link set lo up
ip addr add {SEARCH_HOST}/32 dev lo
ip addr add {ARTICLE_HOST}/32 dev lo
'{fixture}' --addr {SEARCH_HOST}:80 --addr {ARTICLE_HOST}:80 --key {BRAVE_KEY} --log '{d}/requests.jsonl' > '{d}/fixture.log' 2>&1 &
'{mock}' --port {MOCK_PORT} --policy web-cite > '{d}/mock.log' 2>&1 &
for port in {SEARCH_HOST}:80 {ARTICLE_HOST}:80 127.0.0.1:{MOCK_PORT}; do
  tries=0
  until (exec 3<>"/dev/tcp/${{port%:*}}/${{port#*:}}") 2>/dev/null; do
    tries=$((tries + 1)); [ "$tries" -lt 200 ] || {{ echo "nothing listens on $port" >&2; exit 97; }}
    sleep 0.05
  done
done
set +e
'{deepsolve}' solve --tool web_search \
  --base-url http://127.0.0.1:{MOCK_PORT}/v1 --model mock --set llm.probe=never '{problem}' > '{d}/out.txt' 2> '{d}/err.txt'
echo $? > '{d}/status'
sleep 0.1
"#,
        fixture = fixture.display(),
        mock = mock.display(),
        deepsolve = deepsolve.display(),
    )
}

#[test]
fn a_solve_searches_fetches_through_public_hops_refuses_the_metadata_hop_and_cites() {
    let home = Isolated::new();
    let dir = home.path();
    let probe = Command::new("unshare").args(["-rn", "true"]).status();
    assert!(
        probe.is_ok_and(|s| s.success()),
        "`unshare -rn` must work (user namespaces; the sandbox needs them too)"
    );
    let cmd = home.std_command();
    let settings = [
        ("DEEPSOLVE_TOOLS__WEB_SEARCH__PROVIDER", "brave".to_string()),
        (
            "DEEPSOLVE_TOOLS__WEB_SEARCH__BRAVE__BASE_URL",
            format!("http://{SEARCH_HOST}"),
        ),
        ("BRAVE_API_KEY", BRAVE_KEY.to_string()),
    ];
    let problem = "What does the squeeze theorem say?";
    let status = Command::new("unshare")
        .args(["-rn", "bash", "-c", &script(dir, problem)])
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .envs(settings.iter().map(|(k, v)| (k, v)))
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .status()
        .expect("run unshare");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    assert!(
        status.success(),
        "the namespace script failed ({status}); fixture: {}; mock: {}",
        read("fixture.log"),
        read("mock.log")
    );
    let (out, err) = (read("out.txt"), read("err.txt"));
    assert_eq!(read("status").trim(), "0", "stdout:\n{out}\nstderr:\n{err}");

    // The answer cites the search result and the page it read, and the Sources list resolves
    // both numbers to their URLs (the page's: where the redirect ended).
    assert!(out.contains("The search found it [1]"), "{out}");
    let page = format!("http://{ARTICLE_HOST}/squeeze");
    assert!(out.contains("converges to that limit too"), "{out}");
    assert!(
        out.contains(&format!(
            "[1] Squeeze theorem (mirror), http://{SEARCH_HOST}/trap"
        )),
        "{out}"
    );
    let cited_page = out
        .lines()
        .map(|l| l.trim().trim_start_matches("- "))
        .find(|l| l.starts_with('[') && l.ends_with(&page))
        .unwrap_or_else(|| panic!("no source line for {page}:\n{out}"));
    assert!(cited_page.contains("The squeeze theorem"), "{cited_page}");

    // The metadata hop was refused, and the model was told why.
    let shown = format!("{out}{err}");
    assert!(
        shown.contains("redirected to a refused address: http://169.254.169.254/"),
        "{shown}"
    );

    // What the web saw: the key went to the search host only; the metadata hop never left
    // the binary (nothing listens there, and the guard refused it before connecting).
    let requests: Vec<serde_json::Value> = read("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let uris: Vec<String> = requests
        .iter()
        .map(|r| {
            format!(
                "{}{}",
                r["host"].as_str().unwrap_or(""),
                r["uri"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(
        uris.iter()
            .any(|u| u.starts_with(&format!("{SEARCH_HOST}/res/v1/web/search?"))),
        "{uris:?}"
    );
    for wanted in ["/trap", "/moved"] {
        assert!(uris.contains(&format!("{SEARCH_HOST}{wanted}")), "{uris:?}");
    }
    assert!(
        uris.contains(&format!("{ARTICLE_HOST}/squeeze")),
        "{uris:?}"
    );
    for request in &requests {
        let carries_key = request["headers"].to_string().contains(BRAVE_KEY)
            || request["uri"].to_string().contains(BRAVE_KEY);
        let is_search = request["uri"]
            .as_str()
            .is_some_and(|u| u.starts_with("/res/v1/web/search"));
        assert_eq!(carries_key, is_search, "{request}");
    }
    assert!(
        !err.contains(BRAVE_KEY) && !out.contains(BRAVE_KEY),
        "the key was printed"
    );
}
