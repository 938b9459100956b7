//! Headless Chromium for the reports' tests: the DOM of a page after the browser loaded it
//! at 1400 px (the Debian package `chromium`, or RTLAB_CHROMIUM; CI installs it).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The browser: RTLAB_CHROMIUM, else the first of chromium, chromium-browser, google-chrome
/// in PATH.
pub fn chromium() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("RTLAB_CHROMIUM") {
        return p.into();
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            if dir.join(name).is_file() {
                return dir.join(name);
            }
        }
    }
    panic!("chromium not found in PATH (install the Debian package `chromium`: scripts/setup.sh --deps-only, or set RTLAB_CHROMIUM)");
}

/// The DOM of `html` after headless Chromium loaded it at 1400 px (bounded: 120 s).
pub fn dump_dom(dir: &Path, html: &Path) -> String {
    let (out, err) = (dir.join("chromium.stdout"), dir.join("chromium.stderr"));
    let mut child = Command::new(chromium())
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
            "--window-size=1400,1000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("file://{}", html.display()))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("start chromium");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "chromium: {status}: {}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    std::fs::read_to_string(&out).unwrap()
}

/// A report's table as Chromium lays it out at 1400 px: each row's text, the table's right
/// edge and the page's widths (`table_right`, `client_width`, `scroll_width`).
pub struct Layout(pub String);

impl Layout {
    /// Each row's text, its white space folded.
    pub fn rows(&self) -> Vec<&str> {
        self.0.lines().filter_map(|l| l.strip_prefix("ROW ")).collect()
    }

    /// A width of the first line (`client_width` ...).
    pub fn get(&self, k: &str) -> i64 {
        let first = self.0.lines().next().unwrap_or("");
        first
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} missing in '{}'", self.0))
    }
}

/// Load `html` (a report: one `</body>`, no script of its own) into Chromium with a script
/// that writes the layout of its first `table.CLASS`, and read that layout back.
pub fn table_layout(dir: &Path, html: &str, class: &str) -> Layout {
    const SCRIPT: &str = r#"<script>
(function () {
  var t = document.querySelector('table.CLASS');
  var p = document.createElement('pre');
  p.id = 'layout';
  var rows = Array.prototype.map.call(t.querySelectorAll('tr'), function (r) {
    return 'ROW ' + r.innerText.replace(/\s+/g, ' ').trim();
  });
  p.textContent = 'LAYOUT table_right=' + Math.ceil(t.getBoundingClientRect().right)
    + ' client_width=' + document.documentElement.clientWidth
    + ' scroll_width=' + document.documentElement.scrollWidth + '\n' + rows.join('\n') + '\nEND';
  document.body.appendChild(p);
})();
</script></body>"#;
    assert_eq!(html.matches("</body>").count(), 1);
    let probe = dir.join("layout.html");
    std::fs::write(&probe, html.replace("</body>", &SCRIPT.replace("CLASS", class))).unwrap();
    let dom = dump_dom(dir, &probe);
    assert!(dom.contains("<pre id=\"layout\">LAYOUT "), "the layout script did not run: {dom}");
    let layout = dom.rsplit("LAYOUT ").next().and_then(|l| l.split("\nEND").next()).unwrap_or("");
    eprintln!("{layout}");
    Layout(layout.to_string())
}
