//! `ip` (iproute2) for the tests that make network namespaces and links. Include it with
//! `#[path = "support/ip.rs"] mod ip_cmd;`.

/// Run `ip ARGS`; a failure fails the test with the command and its stderr.
pub fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}
