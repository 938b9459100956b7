//! The HTML report opened in headless Chromium (Debian package `chromium`, installed by
//! scripts/setup.sh): the screenshot must exist and show the tables (their header colour in
//! the top part of the page) and the plots (the bar colour of the SVG histograms). A missing
//! chromium binary fails the test with a clear message: CI installs it.

mod fixture;

use std::process::Command;
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

/// Run headless chromium on `html` with `extra` arguments (bounded: 120 s); its stdout.
fn run_chromium(dir: &std::path::Path, html: &std::path::Path, extra: &[String]) -> String {
    let bin = chromium();
    let profile = dir.join("profile");
    let out = dir.join("chromium.stdout");
    let err = dir.join("chromium.stderr");
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
        .args(extra)
        .arg(format!("file://{}", html.display()))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
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
    let err = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status.success(), "chromium failed ({status}): {err}");
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    std::fs::write(&html, rtlab_report::render_html(&[fixture::run()])).unwrap();
    let _ = std::fs::copy(
        &html,
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtlab-report.html"),
    );
    let shot = dir.path().join("shot.png");
    run_chromium(
        dir.path(),
        &html,
        &[format!("--screenshot={}", shot.display()), "--window-size=1400,3000".into()],
    );
    assert!(shot.is_file(), "no screenshot written");
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

/// A run whose percentile table is as wide as real runs make it: long case names (pubsub
/// parameters), long stream and metric names, 7-digit counts and 8-digit values.
fn wide_run() -> rtlab_core::run::Run {
    let mut run = fixture::run();
    for c in run.cases.iter_mut() {
        c.name = format!(
            "pubsub/cpu+net/rt-affinities/history=keep-last:5,payload=65536,rate=1khz,subscribers=4,transport=zenoh#{}",
            c.index
        );
        if let Some(d) = c.document.as_mut() {
            for (i, s) in d.streams.iter_mut().enumerate() {
                s.name = format!("subscriber{i}.publisher_lateness");
                s.metric = "one_way_latency_with_clock_offset".into();
                let t = &mut s.stats;
                t.count = 4_320_000;
                t.missed = Some(1_234_567);
                t.lost = Some(123_456);
                t.overruns = Some(18_500_000);
                for v in [
                    &mut t.min_ns,
                    &mut t.mean_ns,
                    &mut t.stddev_ns,
                    &mut t.p50_ns,
                    &mut t.p90_ns,
                    &mut t.p99_ns,
                    &mut t.p99_9_ns,
                    &mut t.p99_99_ns,
                    &mut t.max_ns,
                ] {
                    *v = Some(-16_123_456_789);
                }
            }
        }
    }
    run
}

/// The percentile table fits a 1400 px page: the report is opened at 1400 px with a small
/// script added by this test (the report itself has none) that writes the layout into the
/// DOM, which `--dump-dom` prints: the table's right edge and the `missed` header's right
/// edge must be inside the viewport, and the page must not scroll sideways.
#[test]
fn percentile_table_fits_a_1400px_page_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let report = rtlab_report::render_html(&[wide_run()]);
    let probe = r#"<script>
(function () {
  var t = document.querySelector('table.percentiles');
  var ths = t.querySelectorAll('th');
  var missed = Array.prototype.filter.call(ths, function (h) { return h.textContent.trim() === 'missed'; })[0];
  var last = ths[ths.length - 1];
  var p = document.createElement('pre');
  p.id = 'layout';
  p.textContent = 'LAYOUT table_right=' + Math.ceil(t.getBoundingClientRect().right)
    + ' missed_right=' + (missed ? Math.ceil(missed.getBoundingClientRect().right) : -1)
    + ' last_right=' + Math.ceil(last.getBoundingClientRect().right)
    + ' client_width=' + document.documentElement.clientWidth
    + ' scroll_width=' + document.documentElement.scrollWidth + ' END';
  document.body.appendChild(p);
})();
</script></body>"#;
    assert_eq!(report.matches("</body>").count(), 1);
    std::fs::write(&html, report.replace("</body>", probe)).unwrap();
    let _ = std::fs::copy(
        &html,
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtlab-report-wide.html"),
    );
    let dom =
        run_chromium(dir.path(), &html, &["--dump-dom".into(), "--window-size=1400,1000".into()]);
    // the last occurrence: the <pre> the script appended, not the script's own text
    assert!(dom.contains("<pre id=\"layout\">LAYOUT "), "the layout script did not run");
    let line = dom.rsplit("LAYOUT ").next().and_then(|l| l.split(" END").next()).unwrap_or("");
    let get = |k: &str| -> i64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} missing in '{line}'"))
    };
    eprintln!("layout at 1400 px: {line}");
    let page = get("client_width");
    assert_eq!(page, 1400, "the viewport is the 1400 px page");
    assert!(get("missed_right") > 0, "the missed column is there: {line}");
    assert!(get("missed_right") <= page, "the missed column is cut off: {line}");
    assert!(get("table_right") <= page, "the percentile table is wider than the page: {line}");
    assert!(get("last_right") <= page, "the last column is cut off: {line}");
    assert!(get("scroll_width") <= page, "the page scrolls sideways: {line}");
}

/// S1's noise cases as wide as they get: five profiles side by side (rt-isolation on one CPU),
/// 10-digit max gaps, 100 % stolen, 7-digit rates; built on the fixture's first case (its
/// stream renamed to the gap stream of each CPU, figures set: a layout test, not a
/// measurement).
fn s1_noise_run() -> rtlab_core::run::Run {
    let mut run = fixture::run();
    let template = run.cases[0].clone();
    run.cases.clear();
    let profiles = ["no-rt", "rt-normal", "rt-affinities", "rt-isolation", "rt-kthreads"];
    for (i, p) in profiles.iter().enumerate() {
        let mut c = template.clone();
        (c.index, c.probe, c.load, c.profile) =
            (i as u32, "noise".into(), "idle".into(), p.to_string());
        c.name = format!("noise/idle/{p}");
        c.params.clear();
        let d = c.document.as_mut().unwrap();
        let first = d.streams[0].clone();
        let cpus: &[usize] = if *p == "rt-isolation" { &[1] } else { &[0, 1] };
        d.streams = cpus
            .iter()
            .map(|cpu| {
                let mut s = first.clone();
                s.name = format!("cpu{cpu}");
                s.metric = rtlab_report::summary::noise::GAP_METRIC.into();
                s.labels = [
                    ("measured_ns", "300000000000"),
                    ("stolen_ns", "300000000000"),
                    ("threshold_ns", "1000"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
                s.stats.count = 370_370_370;
                s.stats.max_ns = Some(16_123_456_789);
                s
            })
            .collect();
        run.cases.push(c);
    }
    run
}

/// The noise profiles side by side fit a 1400 px page with S1's five profiles: the pivot's
/// right edge and its last header inside the viewport, no sideways scrolling.
#[test]
fn the_noise_pivot_of_five_profiles_fits_a_1400px_page_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let report = rtlab_report::render_html(&[s1_noise_run()]);
    assert!(report.contains("<table class=\"noisepivot\">"));
    let probe = r#"<script>
(function () {
  var t = document.querySelector('table.noisepivot');
  var ths = t.querySelectorAll('th');
  var last = ths[ths.length - 1];
  var cells = t.querySelectorAll('tr')[2].querySelectorAll('td');
  var p = document.createElement('pre');
  p.id = 'layout';
  p.textContent = 'LAYOUT table_right=' + Math.ceil(t.getBoundingClientRect().right)
    + ' last_right=' + Math.ceil(last.getBoundingClientRect().right)
    + ' cells=' + cells.length
    + ' client_width=' + document.documentElement.clientWidth
    + ' scroll_width=' + document.documentElement.scrollWidth + ' END';
  document.body.appendChild(p);
})();
</script></body>"#;
    assert_eq!(report.matches("</body>").count(), 1);
    std::fs::write(&html, report.replace("</body>", probe)).unwrap();
    let dom =
        run_chromium(dir.path(), &html, &["--dump-dom".into(), "--window-size=1400,1000".into()]);
    assert!(dom.contains("<pre id=\"layout\">LAYOUT "), "the layout script did not run");
    let line = dom.rsplit("LAYOUT ").next().and_then(|l| l.split(" END").next()).unwrap_or("");
    let get = |k: &str| -> i64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} missing in '{line}'"))
    };
    eprintln!("noise pivot at 1400 px: {line}");
    let page = get("client_width");
    assert_eq!(page, 1400, "the viewport is the 1400 px page");
    assert_eq!(get("cells"), 1 + 5 * 3, "cpu0's row: the CPU and 5 groups of 3: {line}");
    assert!(get("table_right") <= page, "the noise pivot is wider than the page: {line}");
    assert!(get("last_right") <= page, "the last column is cut off: {line}");
    assert!(get("scroll_width") <= page, "the page scrolls sideways: {line}");
}

/// A newcomer's first screen answers "kept or not, and what helps", and no plot cuts its text
/// off: the report of the fixture's run and of a run with long pub/sub names is opened at
/// 1400 x 900 with a small script added by this test (the report has none) that writes the
/// layout into the DOM: the verdict box's bottom edge, and every SVG text element that leaves
/// its plot.
#[test]
fn the_verdict_is_on_the_first_screen_and_no_plot_text_is_cut_off_in_headless_chromium() {
    let probe = r#"<script>
(function () {
  var v = document.querySelector('div.verdict');
  var r = v ? v.getBoundingClientRect() : { top: -1, bottom: 1e9 };
  var texts = 0, cut = 0, first = '';
  document.querySelectorAll('svg').forEach(function (svg) {
    var s = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(function (t) {
      texts++;
      var b = t.getBoundingClientRect();
      if (b.left < s.left - 1 || b.right > s.right + 1 || b.top < s.top - 1 || b.bottom > s.bottom + 1) {
        cut++;
        if (!first) first = encodeURIComponent(t.textContent);
      }
    });
  });
  var p = document.createElement('pre');
  p.id = 'layout';
  p.textContent = 'LAYOUT verdict_top=' + Math.floor(r.top) + ' verdict_bottom=' + Math.ceil(r.bottom)
    + ' texts=' + texts + ' cut=' + cut + ' first_cut=' + (first || '-')
    + ' viewport=' + window.innerHeight + ' END';
  document.body.appendChild(p);
})();
</script></body>"#;
    for (what, run) in [("the fixture's run", fixture::run()), ("long pub/sub names", long_names())]
    {
        let dir = tempfile::tempdir().unwrap();
        let html = dir.path().join("report.html");
        let report = rtlab_report::render_html(&[run]);
        std::fs::write(&html, report.replace("</body>", probe)).unwrap();
        let dom = run_chromium(
            dir.path(),
            &html,
            &["--dump-dom".into(), "--window-size=1400,900".into()],
        );
        assert!(
            dom.contains("<pre id=\"layout\">LAYOUT "),
            "{what}: the layout script did not run"
        );
        let line = dom.rsplit("LAYOUT ").next().and_then(|l| l.split(" END").next()).unwrap_or("");
        let get = |k: &str| -> String {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{what}: {k} missing in '{line}'"))
                .to_string()
        };
        let num = |k: &str| -> i64 { get(k).parse().unwrap() };
        eprintln!("{what}: {line}");
        assert!(num("verdict_top") > 0, "{what}: no verdict: {line}");
        assert!(
            num("verdict_bottom") <= num("viewport"),
            "{what}: the verdict is not all on the first screen: {line}"
        );
        assert!(num("texts") > 50, "{what}: the plots' text was not found: {line}");
        assert_eq!(
            num("cut"),
            0,
            "{what}: a plot's text is cut off (the first: {}): {line}",
            get("first_cut")
        );
    }
}

/// The fixture's run with pub/sub-like names as long as real runs make them: cases named
/// with every setting, the timer's parameters as long (the plots' titles hold them).
fn long_names() -> rtlab_core::run::Run {
    let mut run = fixture::run();
    for c in run.cases.iter_mut() {
        let profile = c.profile.clone();
        let load = c.load.clone();
        let axes = format!(
            "history=keep-last:5,mode=roundtrip,payload=65536,rate=1khz,reliability=best-effort,subscribers=4,transport=cyclonedds,index={}",
            c.index % 2
        );
        c.name = format!("{}/{load}/{profile}/{axes}#1", c.probe);
        if let Some(d) = c.document.as_mut() {
            for s in d.streams.iter_mut() {
                s.name = format!("cyclonedds.roundtrip.65536B.1000hz.n4.{}", s.name);
            }
        }
    }
    run
}
