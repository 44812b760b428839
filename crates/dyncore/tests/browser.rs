//! The report page (`out/index.html`) in a real browser: headless Chromium
//! renders it, every image must load and the console must stay silent, and
//! a screenshot is kept for a person to look at.
//!
//! The check is a small script injected into a copy of the page (the page
//! itself has no scripts): on `load` it records how many images there are,
//! which did not load (`complete && naturalWidth > 0` fails) and every
//! error event, as an attribute that `--dump-dom` prints. Console messages
//! come from Chromium's log (`--enable-logging=stderr`). A second copy with
//! a broken image path and a console error must fail both checks, so the
//! check is shown to be able to fail on every run.
//!
//! Where no Chromium is installed (`/usr/bin/chromium`, or `chromium` /
//! `chromium-browser` on PATH; `DYNCORE_CHROMIUM=path` names another), or it
//! cannot start here, the test says why and passes. `.ci/run` installs
//! Debian's `chromium` where it can.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A folder removed when dropped, so no run leaves anything in /tmp.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("dyncore-browser-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn find_chromium() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("DYNCORE_CHROMIUM") {
        let named = PathBuf::from(named);
        return named.is_file().then_some(named);
    }
    let fixed = PathBuf::from("/usr/bin/chromium");
    if fixed.is_file() {
        return Some(fixed);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Runs headless Chromium on `url` with a fresh profile; `None` if it did
/// not finish within `limit` (it is then killed).
fn chromium(bin: &Path, extra: &[String], url: &str, limit: Duration) -> Option<Output> {
    let profile = TempDir::new("profile");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    // Drain both pipes while waiting: a page larger than a pipe's buffer
    // (64 KiB) would otherwise block chromium writing its dump, and the wait
    // would never end.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let stdout = stdout.join().ok()?;
                let stderr = stderr.join().ok()?;
                return Some(Output { status, stdout, stderr });
            }
            Ok(None) if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => return None,
        }
    }
}

const LIMIT: Duration = Duration::from_secs(180);

/// The check script, put first in `<head>` so it sees every load error.
const CHECK: &str = r#"<script>
(function () {
  var errors = [];
  window.addEventListener('error', function (e) {
    errors.push(e.target && e.target.getAttribute && e.target.getAttribute('src')
      ? 'failed to load ' + e.target.getAttribute('src') : 'script error: ' + e.message);
  }, true);
  window.addEventListener('load', function () {
    var imgs = [].slice.call(document.images);
    var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                     .map(function (i) { return i.getAttribute('src'); });
    document.documentElement.setAttribute('data-check', JSON.stringify({
      images: imgs.length, broken: broken, errors: errors,
      height: document.documentElement.scrollHeight }));
  });
})();
</script>"#;

#[derive(Debug)]
struct PageCheck {
    images: u64,
    broken: Vec<String>,
    errors: Vec<String>,
    console: Vec<String>,
    height: u64,
}

fn unescape_attr(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Renders `html` (written as `name` into `dir`, beside the report's files)
/// with the check script, and reads what it found.
fn check_page(bin: &Path, dir: &Path, name: &str, html: &str) -> PageCheck {
    let checked = html.replacen("<head>", &format!("<head>\n{CHECK}"), 1);
    assert!(checked.contains("data-check"), "the page has a <head> to put the check in");
    let page = dir.join(name);
    std::fs::write(&page, checked).unwrap();
    let url = format!("file://{}", page.display());
    let out = chromium(bin, &["--dump-dom".into(), "--virtual-time-budget=10000".into()], &url, LIMIT)
        .unwrap_or_else(|| panic!("chromium did not finish rendering {url} within {LIMIT:?}"));
    let dom = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let attr = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the check script did not run on {url}; chromium said:\n{stderr}"));
    let v: serde_json::Value = serde_json::from_str(&unescape_attr(attr)).expect("the check writes JSON");
    let strings = |k: &str| -> Vec<String> {
        v[k].as_array().unwrap().iter().map(|s| s.as_str().unwrap_or_default().to_string()).collect()
    };
    PageCheck {
        images: v["images"].as_u64().unwrap(),
        broken: strings("broken"),
        errors: strings("errors"),
        console: stderr.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect(),
        height: v["height"].as_u64().unwrap_or(0),
    }
}

fn dyncore_run(out: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_dyncore"))
        .args(["--out", out.to_str().unwrap(), "run", "--quiet", "--seeds", "2"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the dyncore binary runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Builds a report into `out`: every shipped scenario (2 seeds, to keep the
/// test short) and a small bench report, so the page has both kinds.
fn build_report(out: &Path) {
    dyncore_run(out);
    // A bench report as the benchmarks write them (Markdown and a PNG
    // beside it), then the index again so the page includes it.
    let bench = out.join("bench-example");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::copy(out.join("fig3-taxation/plot.png"), bench.join("plot.png")).unwrap();
    std::fs::write(
        bench.join("report.md"),
        "# dyncore bench example\n\nMachine: test.  \n\n| goal | measured | verdict |\n|---|---|---|\n| x ≤ 2× y | 1.5× | PASS |\n\n![plot](plot.png)\n",
    )
    .unwrap();
    dyncore_run(out);
}

#[test]
fn report_page_renders_in_chromium_with_every_image_and_no_console_errors() {
    let Some(bin) = find_chromium() else {
        dyncore_runtime::testing::skip(
            dyncore_runtime::testing::Need::Browser,
            "no Chromium (/usr/bin/chromium, chromium / chromium-browser on PATH, or DYNCORE_CHROMIUM); \
             install Debian's `chromium` package (`apt-get install -y chromium`, as .ci/run does) to run this test",
        );
        return;
    };
    // Can the browser start at all here? If not, say why and skip; if it
    // can, every later failure is the page's.
    let probe = chromium(&bin, &["--dump-dom".into()], "about:blank", LIMIT);
    let started = probe
        .as_ref()
        .is_some_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("<html"));
    if !started {
        let why = probe.map_or(format!("it did not finish within {LIMIT:?}"), |o| {
            format!(
                "{} rendering about:blank; it said: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )
        });
        dyncore_runtime::testing::skip(
            dyncore_runtime::testing::Need::Browser,
            &format!("{} cannot start here: {why}", bin.display()),
        );
        return;
    }

    let tmp = TempDir::new("report");
    let out = tmp.0.join("out");
    build_report(&out);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let expected_images = html.matches("<img ").count() as u64;
    assert!(expected_images >= 10, "every scenario's plot and the bench's: {expected_images}");
    assert!(html.contains("bench-example/plot.png"), "the bench report is on the page");
    for outside in ["<script", "<link", "@import", "url(", "src=\"http", "src=\"//"] {
        assert!(!html.contains(outside), "the page must load nothing from outside itself: found `{outside}`");
    }

    let good = check_page(&bin, &out, "index.check.html", &html);
    assert_eq!(good.images, expected_images, "{good:?}");
    assert!(good.broken.is_empty(), "images that did not load: {:?}", good.broken);
    assert!(good.errors.is_empty(), "error events: {:?}", good.errors);
    assert!(good.console.is_empty(), "console messages: {:?}", good.console);

    // The same check on a copy with a broken image and a console error
    // must fail both ways.
    let broken_html = html.replacen("fig4-parallel/plot.png", "fig4-parallel/no-such-plot.png", 1).replacen(
        "</body>",
        "<script>console.error('negative control')</script></body>",
        1,
    );
    let bad = check_page(&bin, &out, "index.broken.html", &broken_html);
    assert_eq!(bad.broken, vec!["fig4-parallel/no-such-plot.png".to_string()], "{bad:?}");
    assert!(bad.console.iter().any(|l| l.contains("negative control")), "{bad:?}");

    // A screenshot of the whole page at a laptop's width, kept for a
    // person to look at (target/tmp/report-page.png).
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-page.png");
    let _ = std::fs::remove_file(&shot);
    let height = good.height.clamp(800, 16_000);
    let url = format!("file://{}", out.join("index.html").display());
    let o = chromium(
        &bin,
        &[format!("--screenshot={}", shot.display()), format!("--window-size=1280,{height}")],
        &url,
        LIMIT,
    )
    .expect("chromium takes the screenshot in time");
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(&png[1..4], b"PNG");
    // IHDR: width and height, big-endian, at bytes 16..24.
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(width, 1280);
    eprintln!("screenshot of the report page: {}", shot.display());
}
