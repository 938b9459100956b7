//! A fleet's store for benchmarks (`scripts/bench-fleet.sh`), made of real runs.
//!
//! ```text
//! fleet copy FROM RUN TO N [HOSTS]   run RUN of store FROM stored N times into TO, as the
//!                                    runs of HOSTS hosts (default 8: robot-00..), one an
//!                                    hour, the kernel changing every N/4 runs per host
//! fleet attach-raw FROM RUN CSV TO   run RUN of FROM stored once into TO with the raw
//!                                    samples of CSV (stream,index,at_ns,value_ns) as its
//!                                    streams' raw samples
//! ```
//! Each copy goes through the store's own API (`begin_run`, `add_case`, `finish_run`): a new
//! uuid, the host columns, every case with its statistics, histograms, windows and evidence,
//! as `rtlab run` stores them. Only the host name, kernel and start time differ from the
//! real run.

use rtlab_core::run::RunStatus;
use rtlab_store::Store;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_else(|| usage());
    let num = |i: usize| arg(i).parse::<i64>().unwrap_or_else(|_| usage());
    let open = |s: &str| Store::open(s).unwrap_or_else(|e| fail(e));
    match arg(0).as_str() {
        "copy" => {
            let hosts = args.get(5).map(|_| num(5)).unwrap_or(8).max(1);
            copy(&open(&arg(1)), num(2), &mut open(&arg(3)), num(4), hosts)
        }
        "attach-raw" => attach_raw(&open(&arg(1)), num(2), &arg(3), &mut open(&arg(4))),
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: fleet copy FROM RUN TO N [HOSTS] | fleet attach-raw FROM RUN CSV TO");
    std::process::exit(2)
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("fleet: {e}");
    std::process::exit(2)
}

fn copy(from: &Store, id: i64, to: &mut Store, n: i64, hosts: i64) {
    let run = from.load_run(id).unwrap_or_else(|e| fail(e));
    let t0 = Instant::now();
    let per_host = (n / hosts).max(1);
    for i in 0..n {
        let mut r = run.clone();
        let (host, k) = (i % hosts, i / hosts);
        r.info.environment.hostname = format!("robot-{host:02}");
        r.info.environment.kernel_release = format!("6.{}.0-rt", 1 + 4 * k / per_host);
        // one run an hour from 2026-01-01 (months of 28 days)
        let (day, hour) = (i / 24, i % 24);
        let (year, month, mday) = (2026 + day / 336, 1 + day / 28 % 12, 1 + day % 28);
        r.info.started_at = format!("{year}-{month:02}-{mday:02}T{hour:02}:00:00Z");
        let rid = to.begin_run(&r.info).unwrap_or_else(|e| fail(e));
        for c in &r.cases {
            to.add_case(rid, c).unwrap_or_else(|e| fail(e));
        }
        to.finish_run(rid, RunStatus::Complete).unwrap_or_else(|e| fail(e));
        if (i + 1) % 1000 == 0 {
            eprintln!("{} runs in {:.1} s", i + 1, t0.elapsed().as_secs_f64());
        }
    }
    println!(
        "stored {n} runs of {} cases in {:.1} s ({:.2} ms a run) into {}",
        run.cases.len(),
        t0.elapsed().as_secs_f64(),
        t0.elapsed().as_secs_f64() * 1000.0 / n as f64,
        to.label()
    );
}

fn attach_raw(from: &Store, id: i64, csv: &str, to: &mut Store) {
    let mut run = from.load_run(id).unwrap_or_else(|e| fail(e));
    for c in &mut run.cases {
        for s in c.document.iter_mut().flat_map(|d| d.streams.iter_mut()) {
            s.raw_file = Some(csv.to_string());
        }
    }
    let t0 = Instant::now();
    let rid = to.begin_run(&run.info).unwrap_or_else(|e| fail(e));
    for c in &run.cases {
        to.add_case(rid, c).unwrap_or_else(|e| fail(e));
    }
    to.finish_run(rid, RunStatus::Complete).unwrap_or_else(|e| fail(e));
    println!(
        "stored run {rid} with the raw samples of {csv} in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
