//! Builds the C++ shim over eProsima Fast DDS (fastdds/shim.cpp, the `fastdds` transport)
//! against the system's Fast DDS 2.9 / Fast CDR 1.0 (Debian 12: libfastrtps-dev,
//! libfastcdr-dev; scripts/setup.sh installs them) as a shared object of its own,
//! `$OUT_DIR/librtlab_fastdds29.so`, which the crate embeds (`include_bytes!`) and loads
//! when the `fastdds` transport is first opened (`fastdds::ffi`). So the rtlab binary does
//! not link Fast DDS 2.9: a process that never opens `fastdds` never maps it, and a process
//! that runs ROS 2 (`ros2`, whose RMW may bring another Fast DDS, 3.2 with the package
//! registry's ROS 2) never has two Fast DDS versions mixing their symbols.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=fastdds/shim.cpp");
    println!("cargo:rerun-if-changed=fastdds/shim.h");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut build = cc::Build::new();
    build.cpp(true).std("c++14").pic(true).file("fastdds/shim.cpp").warnings(true);
    let objects = build.compile_intermediates();
    let so = out.join("librtlab_fastdds29.so");
    let mut link = build.get_compiler().to_command();
    link.arg("-shared")
        .arg("-o")
        .arg(&so)
        .args(&objects)
        .arg("-Wl,-soname,librtlab_fastdds29.so")
        // every symbol of the shim resolved by the two libraries (or libstdc++/libc)
        .arg("-Wl,-z,defs")
        .arg("-lfastrtps")
        .arg("-lfastcdr");
    run(link, "linking the Fast DDS shim (is libfastrtps-dev installed? scripts/setup.sh)");
    println!("cargo:rustc-env=RTLAB_FASTDDS_SHIM={}", so.display());
}

fn run(mut c: Command, what: &str) {
    let status = c.status().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(status.success(), "{what}: {c:?} failed with {status}");
}
