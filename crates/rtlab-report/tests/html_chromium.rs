//! The HTML report opened in headless Chromium (Debian package `chromium`, installed by
//! scripts/setup.sh): the screenshot must exist and show the tables (their header colour in
//! the top part of the page) and the plots (the bar colour of the SVG histograms). A missing
//! chromium binary fails the test with a clear message: CI installs it.

mod fixture;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("RTLAB_CHROMIUM") {
        return p.into();
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!("chromium not found in PATH (install the Debian package `chromium`: scripts/setup.sh --deps-only, or set RTLAB_CHROMIUM)");
}

fn near(px: &[u8], rgb: (u8, u8, u8)) -> bool {
    px[0].abs_diff(rgb.0) <= 3 && px[1].abs_diff(rgb.1) <= 3 && px[2].abs_diff(rgb.2) <= 3
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let bin = chromium();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    std::fs::write(&html, rtlab_report::render_html(&[fixture::run()])).unwrap();
    let shot = dir.path().join("shot.png");
    let profile = dir.path().join("profile");
    let mut child = Command::new(&bin)
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
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1400,3000")
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    // bounded: chromium gets 120 s
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
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "chromium failed ({status}): {err}");
    assert!(shot.is_file(), "no screenshot written; chromium said: {err}");
    // keep a copy to look at
    let keep =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtlab-report-screenshot.png");
    let _ = std::fs::copy(&shot, &keep);

    let decoder = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bpp = info.line_size / info.width as usize;
    assert!(bpp >= 3, "unexpected PNG colour type {:?}", info.color_type);
    let (w, h) = (info.width as usize, info.height as usize);
    assert_eq!((w, h), (1400, 3000), "screenshot size");
    let px =
        |x: usize, y: usize| &buf[y * info.line_size + x * bpp..y * info.line_size + x * bpp + 3];
    let mut colours = std::collections::HashSet::new();
    let (mut header, mut bars, mut non_white_top, mut non_white_bottom) =
        (0usize, 0usize, 0usize, 0usize);
    let mut first_bar_y = None;
    for y in 0..h {
        for x in 0..w {
            let p = px(x, y);
            colours.insert((p[0], p[1], p[2]));
            let white = p[0] > 250 && p[1] > 250 && p[2] > 250;
            if !white {
                if y < h / 3 {
                    non_white_top += 1;
                } else {
                    non_white_bottom += 1;
                }
            }
            if near(p, (0xdc, 0xe6, 0xf4)) && y < h / 2 {
                header += 1;
            }
            if near(p, (0x3b, 0x6f, 0xb6)) {
                bars += 1;
                first_bar_y.get_or_insert(y);
            }
        }
    }
    eprintln!("screenshot {} : {} colours, table header px {header}, plot bar px {bars} (first at y={first_bar_y:?}), non-white top {non_white_top}, bottom {non_white_bottom}", keep.display(), colours.len());
    assert!(colours.len() > 1, "blank screenshot");
    assert!(header > 1000, "no table header colour in the top half ({header} px)");
    assert!(bars > 1000, "no plot bars in the screenshot ({bars} px)");
    assert!(
        non_white_top > 10_000 && non_white_bottom > 10_000,
        "a region is empty: top {non_white_top}, bottom {non_white_bottom}"
    );
}
