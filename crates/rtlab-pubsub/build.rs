//! Builds the C++ shim over eProsima Fast DDS (fastdds/shim.cpp, the `fastdds` transport)
//! against the system's Fast DDS 2.9 / Fast CDR 1.0 (Debian 12: libfastrtps-dev,
//! libfastcdr-dev; scripts/setup.sh installs them).

fn main() {
    println!("cargo:rerun-if-changed=fastdds/shim.cpp");
    println!("cargo:rerun-if-changed=fastdds/shim.h");
    cc::Build::new()
        .cpp(true)
        .std("c++14")
        .file("fastdds/shim.cpp")
        .warnings(true)
        .compile("rtlab_fastdds_shim");
    println!("cargo:rustc-link-lib=dylib=fastrtps");
    println!("cargo:rustc-link-lib=dylib=fastcdr");
}
