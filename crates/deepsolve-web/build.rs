//! Embeds the web UI's build (`web/dist` of the workspace): one table row per file, with its
//! content type, an ETag from its content hash, and a gzip copy made here when that is smaller.
//! Without a build, one fallback page says how to make one (and a cargo warning says it too).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A gzip copy is kept only when it saves at least this share of the bytes.
const MIN_SAVING: f64 = 0.1;

fn main() {
    if let Err(e) = run() {
        // A build script has no better channel than its exit: say what failed and stop.
        eprintln!("deepsolve-web: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(env("OUT_DIR")?);
    let web = manifest.join("../../web");
    let dist = web.join("dist");
    let mut files = Vec::new();
    if dist.join("index.html").is_file() {
        println!("cargo:rerun-if-changed={}", dist.display());
        collect(&dist, &dist, &mut files)?;
        files.sort();
        for (_, path) in &files {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    } else {
        // No build yet: rebuild once one appears (cargo watches the whole `web` directory).
        if web.is_dir() {
            println!("cargo:rerun-if-changed={}", web.display());
        }
        println!(
            "cargo:warning=web/dist is missing: the server will serve a page saying the web UI \
             was not built (run scripts/build-web, then build again)"
        );
        files.extend(fallback(&out)?);
    }
    let table = table(&files, &out, !dist.join("index.html").is_file())?;
    write(&out.join("assets.rs"), table.as_bytes())
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Every regular file under `dir`, as (URL path relative to `root` with `/`, file path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if kind.is_dir() {
            collect(root, &path, files)?;
        } else if kind.is_file() {
            let relative = path
                .strip_prefix(root)
                .map_err(|_| format!("{} is outside {}", path.display(), root.display()))?;
            let parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.push((parts.join("/"), path));
        }
    }
    Ok(())
}

/// The generated `ASSETS` table and `BUILT` flag.
fn table(files: &[(String, PathBuf)], out: &Path, fallback: bool) -> Result<String, String> {
    let mut code = String::new();
    let _ = writeln!(
        code,
        "/// `false`: web/dist was missing; only the fallback page is here."
    );
    let _ = writeln!(code, "pub const BUILT: bool = {};", !fallback);
    let _ = writeln!(code, "pub static ASSETS: &[Asset] = &[");
    for (index, (url, path)) in files.iter().enumerate() {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let content_type = content_type(url);
        let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&bytes))[..32]);
        let gzip = match compressible(content_type)
            .then(|| gzip(&bytes))
            .transpose()?
        {
            Some(packed) if (packed.len() as f64) <= bytes.len() as f64 * (1.0 - MIN_SAVING) => {
                let gz = out.join(format!("asset-{index}.gz"));
                write(&gz, &packed)?;
                format!("Some(include_bytes!({:?}))", gz.display().to_string())
            }
            _ => "None".to_string(),
        };
        let absolute = path
            .canonicalize()
            .map_err(|e| format!("cannot resolve {}: {e}", path.display()))?;
        let _ = writeln!(
            code,
            "    Asset {{ path: {url:?}, content_type: {content_type:?}, bytes: include_bytes!({:?}), gzip: {gzip}, etag: {etag:?} }},",
            absolute.display().to_string()
        );
    }
    let _ = writeln!(code, "];");
    Ok(code)
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder
        .write_all(bytes)
        .and_then(|()| encoder.finish())
        .map_err(|e| format!("gzip failed: {e}"))
}

fn content_type(path: &str) -> &'static str {
    let extension = path.rsplit_once('.').map_or("", |(_, ext)| ext);
    match extension.to_ascii_lowercase().as_str() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "txt" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "ttf" => "font/ttf",
        "otf" => "font/otf",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// Text formats (and uncompressed fonts) shrink; images and woff fonts are compressed already.
fn compressible(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || content_type.starts_with("application/json")
        || content_type.starts_with("application/manifest")
        || matches!(
            content_type,
            "image/svg+xml" | "image/x-icon" | "font/ttf" | "font/otf" | "application/wasm"
        )
}

/// The fallback page and its stylesheet (a file, like every asset of the real UI: the pages'
/// CSP allows no inline style), named by its hash like the UI's assets.
fn fallback(out: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let css_hash = hex::encode(Sha256::digest(FALLBACK_CSS.as_bytes()));
    let css_url = format!("assets/fallback-{}.css", &css_hash[..8]);
    let css = out.join("fallback.css");
    write(&css, FALLBACK_CSS.as_bytes())?;
    let page = out.join("fallback-index.html");
    write(&page, FALLBACK_PAGE.replace("{css}", &css_url).as_bytes())?;
    Ok(vec![("index.html".to_string(), page), (css_url, css)])
}

const FALLBACK_CSS: &str = "body {
  font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif;
  max-width: 40rem;
  margin: 4rem auto;
  padding: 0 1rem;
  line-height: 1.5;
  color: #1f2328;
  background: #ffffff;
}
h1 { font-size: 1.5rem; }
pre, code { font-family: ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace; }
pre { background: #f6f8fa; padding: 0.75rem 1rem; border-radius: 6px; }
@media (prefers-color-scheme: dark) {
  body { color: #e6edf3; background: #0d1117; }
  pre { background: #161b22; }
}
";

const FALLBACK_PAGE: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>deepsolve: the web UI was not built</title>
<link rel="stylesheet" href="/{css}"></head>
<body>
<h1>The web UI was not built</h1>
<p>This deepsolve binary was compiled without the web UI: the directory <code>web/dist</code>
did not exist when it was built. The API works as usual (see <a href="/openapi.json">/openapi.json</a>).</p>
<p>To get the UI, build it and then the binary again, from the repository:</p>
<pre>scripts/build-web
cargo build -p deepsolve-cli</pre>
</body>
</html>
"#;
