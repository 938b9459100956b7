//! Builds the C++ shim over eProsima Fast DDS (fastdds/shim.cpp, the `fastdds` transport) as
//! shared objects of their own, which the crate embeds (`include_bytes!`) and loads when the
//! first Fast DDS participant is made (`fastdds::load`, for rtlab-pubsub's `fastdds` transport):
//!
//! - `librtlab_fastdds29.so` against the system's Fast DDS 2.9 / Fast CDR 1.0 (Debian 12:
//!   libfastrtps-dev, libfastcdr-dev; scripts/setup.sh installs them): the default;
//! - `librtlab_fastdds3.so` against the Fast DDS 3 of a ROS 2 installation, when there is one
//!   at build time: `RTLAB_ROS2_PREFIX`, else the one scripts/setup.sh installs
//!   (/opt/rtlab/ros2, Fast DDS 3.2.2 under rmw_fastrtps_cpp). `--fastdds-lib ros2` runs the
//!   fastdds transport on it, the same library the RMW uses: `fastdds` beside `ros2` then
//!   differs by rcl, the RMW and the type support alone. Without such an installation an
//!   empty file stands in and `--fastdds-lib ros2` says this rtlab was built without it.
//!
//! - `librtlab_roscpp.so` against Debian's roscpp (ROS 1: libroscpp-dev 1.15; scripts/setup.sh
//!   installs it), for `rtlab timer --mode roscpp*` (roscpp/shim.cpp). Without roscpp for the
//!   target at build time an empty file stands in, and those modes say this rtlab was built
//!   without it.
//!
//! - `librtlab_trace.so`, rtlab's tracepoint interposer (trace/interpose.c): `rtlab trace`
//!   writes it beside its rings and preloads it into the application (`trace::INTERPOSER`).
//!   It links libc alone.
//!
//! So the rtlab binary links no Fast DDS: a process that never opens `fastdds` never maps one,
//! and one that runs ROS 2 never has two Fast DDS versions mixing their symbols.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=fastdds/shim.cpp");
    println!("cargo:rerun-if-changed=fastdds/shim.h");
    println!("cargo:rerun-if-env-changed=RTLAB_ROS2_PREFIX");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    interposer(&out);
    roscpp(&out);

    let so = out.join("librtlab_fastdds29.so");
    shim(&out.join("v29"), &so, "librtlab_fastdds29.so", &[], &[], &["fastrtps", "fastcdr"]);
    println!("cargo:rustc-env=RTLAB_FASTDDS_SHIM={}", so.display());
    // Debian keeps it under the multiarch include directory
    let mut headers = vec![PathBuf::from("/usr/include/fastrtps/config.h")];
    if let Ok(d) = std::fs::read_dir("/usr/include") {
        headers.extend(d.flatten().map(|e| e.path().join("fastrtps/config.h")));
    }
    let v29 = headers.iter().find_map(|h| header_version(h, "FASTRTPS_VERSION_STR"));
    println!("cargo:rustc-env=RTLAB_FASTDDS29_VERSION={}", v29.unwrap_or_default());

    let prefix = PathBuf::from(
        std::env::var("RTLAB_ROS2_PREFIX").unwrap_or_else(|_| "/opt/rtlab/ros2".into()),
    );
    let config = prefix.join("include/fastdds/config.hpp");
    println!("cargo:rerun-if-changed={}", config.display());
    let so3 = out.join("librtlab_fastdds3.so");
    let lib3 = prefix.join("lib/libfastdds.so");
    // an installation of another architecture (an x86-64 ROS 2 beside a build for aarch64)
    // cannot be linked against: said, and stood in for
    let target = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let machine = elf_machine(&lib3);
    let foreign = match (target.as_str(), machine) {
        ("x86_64", Some(m)) => m != 62,
        ("aarch64", Some(m)) => m != 183,
        _ => false,
    };
    if foreign {
        println!(
            "cargo:warning={} is not built for {target} (this build's target): --fastdds-lib ros2 will not be available (RTLAB_ROS2_PREFIX names a ROS 2 installation of the target's architecture)",
            lib3.display()
        );
    }
    let v3 = header_version(&config, "FASTDDS_VERSION_STR")
        .filter(|v| v.split('.').next().and_then(|m| m.parse::<u32>().ok()) >= Some(3))
        .filter(|_| lib3.exists() && !foreign);
    match &v3 {
        Some(_) => {
            let inc = prefix.join("include");
            let lib = prefix.join("lib");
            shim(
                &out.join("v3"),
                &so3,
                "librtlab_fastdds3.so",
                &[&inc],
                &[&lib],
                &["fastdds", "fastcdr"],
            );
        }
        None if foreign => std::fs::write(&so3, b"").expect("writing the empty stand-in"),
        None => {
            std::fs::write(&so3, b"").expect("writing the empty stand-in");
            println!(
                "cargo:warning=no Fast DDS 3 in {} (scripts/setup.sh installs ROS 2 there): --fastdds-lib ros2 will not be available",
                prefix.display()
            );
        }
    }
    println!("cargo:rustc-env=RTLAB_FASTDDS3_SHIM={}", so3.display());
    println!("cargo:rustc-env=RTLAB_FASTDDS3_VERSION={}", v3.unwrap_or_default());
}

/// Compile roscpp/shim.cpp into `librtlab_roscpp.so` against Debian's roscpp for the target's
/// architecture (its multiarch library directory), or stand an empty file in for it.
fn roscpp(out: &Path) {
    println!("cargo:rerun-if-changed=roscpp/shim.cpp");
    println!("cargo:rerun-if-changed=roscpp/shim.h");
    let so = out.join("librtlab_roscpp.so");
    println!("cargo:rustc-env=RTLAB_ROSCPP_SHIM={}", so.display());
    let target = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let libdir = PathBuf::from(format!("/usr/lib/{target}-linux-gnu"));
    let common = Path::new("/usr/include/ros/common.h");
    println!("cargo:rerun-if-changed={}", common.display());
    let version = std::fs::read_to_string(common).ok().and_then(|t| {
        let part = |name: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("#define ROS_VERSION_{name} ")))?
                .split_whitespace()
                .nth(2)
                .map(str::to_string)
        };
        Some(format!("{}.{}.{}", part("MAJOR")?, part("MINOR")?, part("PATCH")?))
    });
    let version = version.filter(|_| libdir.join("libroscpp.so").exists());
    if version.is_none() {
        std::fs::write(&so, b"").expect("writing the empty stand-in");
        println!(
            "cargo:warning=no roscpp for {target} ({}/libroscpp.so, /usr/include/ros: Debian's libroscpp-dev; scripts/setup.sh installs it): rtlab timer --mode roscpp will not be available",
            libdir.display()
        );
    }
    println!("cargo:rustc-env=RTLAB_ROSCPP_VERSION={}", version.clone().unwrap_or_default());
    if version.is_none() {
        return;
    }
    let objdir = out.join("roscpp");
    std::fs::create_dir_all(&objdir).expect("object directory");
    let mut build = cc::Build::new();
    build.cpp(true).std("c++14").pic(true).file("roscpp/shim.cpp").warnings(true).out_dir(&objdir);
    let objects = build.compile_intermediates();
    let mut link = build.get_compiler().to_command();
    link.arg("-shared").arg("-o").arg(&so).args(&objects);
    link.arg("-Wl,-soname,librtlab_roscpp.so").arg("-Wl,-z,defs").arg("-L").arg(&libdir);
    for l in ["roscpp", "rosconsole", "rostime", "roscpp_serialization", "xmlrpcpp"] {
        link.arg(format!("-l{l}"));
    }
    let status = link.status().unwrap_or_else(|e| panic!("linking librtlab_roscpp.so: {e}"));
    assert!(status.success(), "linking librtlab_roscpp.so: {link:?} failed with {status}");
}

/// Compile trace/interpose.c into `librtlab_trace.so` (C11, hidden but for the tracepoints).
fn interposer(out: &Path) {
    println!("cargo:rerun-if-changed=trace/interpose.c");
    println!("cargo:rerun-if-changed=trace/ring.h");
    let objdir = out.join("trace");
    std::fs::create_dir_all(&objdir).expect("object directory");
    let so = out.join("librtlab_trace.so");
    let mut build = cc::Build::new();
    build
        .std("c11")
        .pic(true)
        .opt_level(2)
        .file("trace/interpose.c")
        .flag("-fvisibility=hidden")
        .warnings(true)
        .extra_warnings(true)
        .out_dir(&objdir);
    let objects = build.compile_intermediates();
    let mut link = build.get_compiler().to_command();
    link.arg("-shared").arg("-o").arg(&so).args(&objects);
    link.arg("-Wl,-soname,librtlab_trace.so").arg("-Wl,-z,defs").arg("-ldl");
    let status = link.status().unwrap_or_else(|e| panic!("linking librtlab_trace.so: {e}"));
    assert!(status.success(), "linking librtlab_trace.so: {link:?} failed with {status}");
    println!("cargo:rustc-env=RTLAB_TRACE_INTERPOSER={}", so.display());
}

/// Compile fastdds/shim.cpp into the shared object `so` (objects under `objdir`).
fn shim(
    objdir: &Path,
    so: &Path,
    soname: &str,
    includes: &[&Path],
    libdirs: &[&Path],
    libs: &[&str],
) {
    std::fs::create_dir_all(objdir).expect("object directory");
    let mut build = cc::Build::new();
    build.cpp(true).std("c++14").pic(true).file("fastdds/shim.cpp").warnings(true).out_dir(objdir);
    for i in includes {
        build.include(i);
    }
    let objects = build.compile_intermediates();
    let mut link = build.get_compiler().to_command();
    link.arg("-shared").arg("-o").arg(so).args(&objects).arg(format!("-Wl,-soname,{soname}"));
    // every symbol of the shim resolved by the libraries named (or libstdc++/libc)
    link.arg("-Wl,-z,defs");
    for d in libdirs {
        link.arg("-L").arg(d);
    }
    for l in libs {
        link.arg(format!("-l{l}"));
    }
    let status = link.status().unwrap_or_else(|e| panic!("linking {soname}: {e}"));
    assert!(status.success(), "linking {soname}: {link:?} failed with {status} (is libfastrtps-dev installed? scripts/setup.sh)");
}

/// The ELF `e_machine` of a library (None: unreadable, or not ELF).
fn elf_machine(lib: &Path) -> Option<u16> {
    let mut head = [0u8; 20];
    std::io::Read::read_exact(&mut std::fs::File::open(lib).ok()?, &mut head).ok()?;
    (&head[..4] == b"\x7fELF").then(|| u16::from_le_bytes([head[18], head[19]]))
}

/// `#define NAME "x.y.z"` in a header.
fn header_version(header: &Path, define: &str) -> Option<String> {
    let text = std::fs::read_to_string(header).ok()?;
    let line = text.lines().find(|l| l.contains("#define") && l.contains(define))?;
    Some(line.split('"').nth(1)?.to_string())
}
