//! Finding the ROS 2 installation the `ros2` transport uses, and what it is: distribution,
//! rcl, the RMW and the DDS (or other middleware) under it, with their versions.
//!
//! Where it looks, first match wins (docs/ros2.md):
//! 1. `--ros2-prefix DIR` (scenario key `ros2_prefix`);
//! 2. `AMENT_PREFIX_PATH` (what `source /opt/ros/<distro>/setup.bash` or a workspace's
//!    `install/setup.bash` sets; every prefix in it is searched for libraries, overlays first);
//! 3. `/opt/ros/*` (one installation; with several, `ROS_DISTRO` picks one);
//! 4. [`DEFAULT_PREFIX`], the one `scripts/setup.sh` installs from the package registry.
//!
//! A prefix is a ROS 2 installation when it has `share/rcl/package.xml` and `lib/librcl.so`.
//! The rcl ABI is checked against the distributions rtlab's declarations were checked
//! against ([`Abi`]): another is refused in one line (or tried with
//! `RTLAB_ROS2_ABI_UNCHECKED=1`, said in the notes). The RMW is `--rmw`, else
//! `RMW_IMPLEMENTATION`, else what `rmw_implementation` would load (rmw_fastrtps_cpp if
//! installed, else the first one the ament index lists); an rcl linked to one RMW (the
//! package registry's wheels) offers only that one.
//!
//! Reads files only; loads nothing (that is [`super::load`]).

use super::elf;
pub use crate::ros2_facts::Abi;
use crate::ros2_facts::{Ros2Facts, Ros2Network};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The installation `scripts/setup.sh` makes: a venv holding the package registry's ROS 2
/// wheels (rcl 10.1 "kilted", rmw_fastrtps_cpp 9.3, Fast DDS 3.2), the embedded default.
pub const DEFAULT_PREFIX: &str = "/opt/rtlab/ros2";
/// Where distributions install by default.
pub const OPT_ROS: &str = "/opt/ros";
/// The environment variable that lets an unchecked rcl ABI be tried.
pub const ABI_UNCHECKED_ENV: &str = "RTLAB_ROS2_ABI_UNCHECKED";

/// The middleware under an RMW, from the library it links.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Middleware {
    /// `Fast DDS`, `Cyclone DDS`, `Zenoh`, `Connext DDS`, `GurumDDS`.
    pub name: String,
    pub version: Option<String>,
    /// The library file it was found in.
    pub library: PathBuf,
}

/// A ROS 2 installation, found and described.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installation {
    /// The prefix holding rcl.
    pub prefix: PathBuf,
    /// Every prefix searched for libraries (the overlays of `AMENT_PREFIX_PATH` too).
    pub prefixes: Vec<PathBuf>,
    /// How it was found: `--ros2-prefix`, `AMENT_PREFIX_PATH`, `/opt/ros/<distro>`, or
    /// `rtlab's default`.
    pub found_by: String,
    /// `humble`, `jazzy`, `kilted`, ... (`ROS_DISTRO` when it came from the environment;
    /// else the rcl version's; `unknown` when neither says).
    pub distro: String,
    pub rcl_version: String,
    pub abi: Abi,
    /// The RMW implementation: `rmw_fastrtps_cpp`, `rmw_cyclonedds_cpp`, `rmw_zenoh_cpp`...
    pub rmw: String,
    pub rmw_version: Option<String>,
    pub rmw_library: PathBuf,
    /// True when rcl links its RMW directly (no `rmw_implementation` to choose another).
    pub rmw_fixed: bool,
    /// The RMWs this installation offers.
    pub rmws: Vec<String>,
    pub middleware: Option<Middleware>,
    /// Where its libraries are: `<prefix>/lib` of each prefix, and the package registry
    /// wheels' own directories (`lib/python3.X/site-packages/ros_*.libs`).
    pub lib_dirs: Vec<PathBuf>,
}

impl Installation {
    /// One line: `ROS 2 kilted (rcl 10.1.3), rmw_fastrtps_cpp 9.3.3 on Fast DDS 3.2.2`.
    pub fn describe(&self) -> String {
        let mw = match &self.middleware {
            Some(m) => {
                format!(" on {} {}", m.name, m.version.as_deref().unwrap_or("(version unknown)"))
            }
            None => String::new(),
        };
        format!(
            "ROS 2 {} (rcl {}), {} {}{mw}",
            self.distro,
            self.rcl_version,
            self.rmw,
            self.rmw_version.as_deref().unwrap_or("(version unknown)")
        )
    }
    /// The Fast DDS its RMW brings (None: another middleware), for `dl::claim_fast_dds`.
    pub fn fast_dds(&self) -> Option<String> {
        self.middleware.as_ref().filter(|m| m.name == "Fast DDS").map(|m| {
            format!(
                "Fast DDS {} (ROS 2 {}'s {} in {})",
                m.version.as_deref().unwrap_or("(version unknown)"),
                self.distro,
                self.rmw,
                self.prefix.display()
            )
        })
    }
}

/// What the search reads from the environment (a struct, so that tests set it).
#[derive(Clone, Debug, Default)]
pub struct Env {
    pub ament_prefix_path: Option<String>,
    pub ros_distro: Option<String>,
    pub rmw_implementation: Option<String>,
    pub abi_unchecked: bool,
    /// `/opt/ros` (tests: a temporary directory).
    pub opt_ros: PathBuf,
    /// [`DEFAULT_PREFIX`] (tests: a temporary directory).
    pub default_prefix: PathBuf,
}

impl Env {
    /// This process's environment.
    pub fn here() -> Env {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Env {
            ament_prefix_path: var("AMENT_PREFIX_PATH"),
            ros_distro: var("ROS_DISTRO"),
            rmw_implementation: var("RMW_IMPLEMENTATION"),
            abi_unchecked: var(ABI_UNCHECKED_ENV).is_some_and(|v| v != "0"),
            opt_ros: PathBuf::from(OPT_ROS),
            default_prefix: PathBuf::from(DEFAULT_PREFIX),
        }
    }
}

/// A prefix holds rcl.
pub fn has_rcl(prefix: &Path) -> bool {
    prefix.join("share/rcl/package.xml").is_file() && prefix.join("lib/librcl.so").is_file()
}

/// `<version>` of a package's `share/<pkg>/package.xml` in any of `prefixes`.
pub fn package_version(prefixes: &[PathBuf], pkg: &str) -> Option<String> {
    prefixes.iter().find_map(|p| {
        let xml = std::fs::read_to_string(p.join("share").join(pkg).join("package.xml")).ok()?;
        let v = xml.split("<version>").nth(1)?.split("</version>").next()?.trim().to_string();
        (!v.is_empty()).then_some(v)
    })
}

/// Find the installation (see the module's order) and the RMW (`rmw`: `--rmw`).
pub fn find(prefix: Option<&Path>, rmw: Option<&str>, env: &Env) -> Result<Installation, String> {
    let (prefixes, found_by) = locate(prefix, env)?;
    describe(prefixes, found_by, rmw, env)
}

/// The prefixes (rcl's first) and how they were found.
fn locate(prefix: Option<&Path>, env: &Env) -> Result<(Vec<PathBuf>, String), String> {
    if let Some(p) = prefix {
        if !has_rcl(p) {
            return Err(format!(
                "--ros2-prefix {}: not a ROS 2 installation (no share/rcl/package.xml and lib/librcl.so there)",
                p.display()
            ));
        }
        return Ok((vec![p.to_path_buf()], "--ros2-prefix".into()));
    }
    let mut looked = Vec::new();
    match &env.ament_prefix_path {
        Some(app) => {
            let all: Vec<PathBuf> =
                app.split(':').filter(|s| !s.is_empty()).map(PathBuf::from).collect();
            if let Some(i) = all.iter().position(|p| has_rcl(p)) {
                let mut prefixes = vec![all[i].clone()];
                prefixes.extend(all.iter().filter(|p| **p != all[i]).cloned());
                return Ok((prefixes, "AMENT_PREFIX_PATH".into()));
            }
            looked.push(format!("AMENT_PREFIX_PATH ({app}: no rcl)"));
        }
        None => looked.push("AMENT_PREFIX_PATH (unset)".into()),
    }
    let mut distros: Vec<PathBuf> = std::fs::read_dir(&env.opt_ros)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| has_rcl(p)).collect())
        .unwrap_or_default();
    distros.sort();
    let name =
        |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match distros.len() {
        0 => looked.push(format!("{}/* (none)", env.opt_ros.display())),
        1 => {
            let p = distros.remove(0);
            return Ok((vec![p.clone()], format!("{}/{}", env.opt_ros.display(), name(&p))));
        }
        _ => {
            if let Some(p) =
                env.ros_distro.as_ref().and_then(|d| distros.iter().find(|p| name(p) == *d))
            {
                return Ok((
                    vec![p.clone()],
                    format!("{}/{} (ROS_DISTRO)", env.opt_ros.display(), name(p)),
                ));
            }
            let names: Vec<String> = distros.iter().map(|p| name(p)).collect();
            return Err(format!(
                "ros2: several ROS 2 installations in {} ({}): source one's setup.bash, set ROS_DISTRO, or give --ros2-prefix DIR",
                env.opt_ros.display(),
                names.join(", ")
            ));
        }
    }
    if has_rcl(&env.default_prefix) {
        return Ok((vec![env.default_prefix.clone()], "rtlab's default".into()));
    }
    looked.push(format!("{} (scripts/setup.sh installs it: absent)", env.default_prefix.display()));
    Err(format!(
        "ros2: no ROS 2 installation found (looked for rcl in: --ros2-prefix (not given), {}): source your ROS 2 setup.bash, give --ros2-prefix DIR, or run scripts/setup.sh",
        looked.join(", ")
    ))
}

/// The library directories of `prefixes`: `lib`, and the package registry wheels' own
/// (`lib/python3.X/site-packages/ros_*.libs`, where their vendored libraries live).
pub fn lib_dirs(prefixes: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for p in prefixes {
        let lib = p.join("lib");
        if lib.is_dir() {
            dirs.push(lib.clone());
        }
        let pys =
            std::fs::read_dir(&lib).map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>());
        let mut pys: Vec<PathBuf> = pys
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.file_name().is_some_and(|n| n.to_string_lossy().starts_with("python3")))
            .collect();
        pys.sort();
        for py in pys {
            let mut libs: Vec<PathBuf> = std::fs::read_dir(py.join("site-packages"))
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            libs.retain(|d| {
                d.is_dir()
                    && d.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n.starts_with("ros_") && n.ends_with(".libs")
                    })
            });
            libs.sort();
            dirs.extend(libs);
        }
    }
    dirs
}

/// The RMWs the ament index of `prefixes` lists (`rmw_typesupport` resources) with a
/// library present, `rmw_implementation` (the chooser, not an RMW) left out.
fn rmws_in(prefixes: &[PathBuf], dirs: &[PathBuf]) -> Vec<String> {
    let mut v: Vec<String> = prefixes
        .iter()
        .flat_map(|p| {
            std::fs::read_dir(p.join("share/ament_index/resource_index/rmw_typesupport"))
                .map(|d| {
                    d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
                })
                .unwrap_or_else(|_| Vec::new())
        })
        .filter(|n| n != "rmw_implementation")
        .filter(|n| dirs.iter().any(|d| d.join(format!("lib{n}.so")).is_file()))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn describe(
    prefixes: Vec<PathBuf>,
    found_by: String,
    rmw: Option<&str>,
    env: &Env,
) -> Result<Installation, String> {
    let prefix = prefixes[0].clone();
    let rcl_version = package_version(&prefixes, "rcl").ok_or_else(|| {
        format!("ros2: {}: share/rcl/package.xml has no <version>", prefix.display())
    })?;
    let from_env = found_by == "AMENT_PREFIX_PATH";
    let distro = match (&env.ros_distro, from_env) {
        (Some(d), true) => d.clone(),
        _ => Abi::distro_of_rcl(&rcl_version)
            .map(String::from)
            .or_else(|| {
                // /opt/ros/<distro>
                prefix
                    .parent()
                    .filter(|p| *p == env.opt_ros)
                    .and_then(|_| prefix.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "unknown".into()),
    };
    let abi = match Abi::of_rcl(&rcl_version) {
        Some(a) => a,
        None if env.abi_unchecked => Abi::Unchecked,
        None => {
            return Err(format!(
                "ros2: rcl {rcl_version} ({}, found by {found_by}) is an rcl ABI rtlab has not checked (it supports humble: rcl 5, jazzy: rcl 9, kilted: rcl 10); {ABI_UNCHECKED_ENV}=1 tries it anyway",
                prefix.display()
            ))
        }
    };
    let dirs = lib_dirs(&prefixes);
    let rcl = prefix.join("lib/librcl.so");
    let rcl_elf = std::fs::read(&rcl).map_err(|e| format!("ros2: {}: {e}", rcl.display()))?;
    let in_rcl = |e: String| format!("ros2: {}: {e}", rcl.display());
    // an installation for another machine (an aarch64 ROS 2 copied beside an x86-64 rtlab)
    // is said here, before the loader's "wrong ELF class" or "cannot open" about one library
    let theirs = elf::machine_in(&rcl_elf).map_err(in_rcl)?;
    if let Some(ours) = elf::THIS_MACHINE.filter(|m| *m != theirs) {
        let (t, o) = (elf::machine_name(theirs), elf::machine_name(ours));
        let remedy = if theirs == elf::EM_AARCH64 {
            "rtlab built for aarch64 (bash scripts/setup.sh --target aarch64, docs/aarch64.md)"
                .into()
        } else {
            format!("an rtlab built for {t}")
        };
        return Err(format!(
            "ros2: the ROS 2 installation in {} is built for {t} ({}) and this rtlab for {o}: it needs {remedy}, or use a ROS 2 installation built for {o}",
            prefix.display(),
            rcl.display(),
        ));
    }
    // an rcl linked to one RMW (the package registry's wheels) rather than rmw_implementation
    let rcl_needs = elf::needed_in(&rcl_elf).map_err(in_rcl)?;
    let linked: Option<String> = rcl_needs.iter().find_map(|n| {
        let stem = n.strip_prefix("lib")?.strip_suffix(".so")?;
        (stem.starts_with("rmw_")
            && !["rmw_implementation", "rmw_dds_common", "rmw_security_common"].contains(&stem)
            && !stem.contains("__")
            && !stem.ends_with("_shared_cpp"))
        .then(|| stem.to_string())
    });
    let rmw_fixed = linked.is_some();
    let mut rmws = rmws_in(&prefixes, &dirs);
    if let Some(l) = &linked {
        rmws = vec![l.clone()];
    }
    let asked = rmw.map(String::from).or_else(|| env.rmw_implementation.clone());
    let rmw = match (asked, &linked) {
        (Some(a), Some(l)) if a != *l => {
            return Err(format!(
                "ros2: --rmw {a}: rcl in {} is built against {l} alone (no rmw_implementation to load another)",
                prefix.display()
            ))
        }
        (Some(a), _) => {
            if !rmws.contains(&a) {
                return Err(format!(
                    "ros2: --rmw {a}: not installed in {} (it offers: {})",
                    prefix.display(),
                    if rmws.is_empty() { "none".into() } else { rmws.join(", ") }
                ));
            }
            a
        }
        (None, Some(l)) => l.clone(),
        // rmw_implementation's own choice: its default, else the first it finds
        (None, None) => {
            if rmws.iter().any(|r| r == "rmw_fastrtps_cpp") {
                "rmw_fastrtps_cpp".into()
            } else {
                rmws.first().cloned().ok_or_else(|| {
                    format!("ros2: {}: no RMW implementation installed", prefix.display())
                })?
            }
        }
    };
    let rmw_library = dirs
        .iter()
        .map(|d| d.join(format!("lib{rmw}.so")))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("ros2: lib{rmw}.so not found in {}", prefix.display()))?;
    let rmw_version = package_version(&prefixes, &rmw);
    let middleware = middleware_of(&rmw_library, &dirs, &prefixes);
    Ok(Installation {
        prefix,
        prefixes,
        found_by,
        distro,
        rcl_version,
        abi,
        rmw,
        rmw_version,
        rmw_library,
        rmw_fixed,
        rmws,
        middleware,
        lib_dirs: dirs,
    })
}

/// The middleware library in the RMW's closure, and its version: from its headers where
/// the installation has them, else from the library file's name (`libddsc.so.0.10.5`).
fn middleware_of(rmw: &Path, dirs: &[PathBuf], prefixes: &[PathBuf]) -> Option<Middleware> {
    let libs = elf::closure(&[rmw.to_path_buf()], dirs).ok()?;
    const KNOWN: [(&str, &str); 6] = [
        ("libfastdds.so", "Fast DDS"),
        ("libfastrtps.so", "Fast DDS"),
        ("libddsc.so", "Cyclone DDS"),
        ("libzenohc.so", "Zenoh"),
        ("libnddsc.so", "Connext DDS"),
        ("libgurumdds.so", "GurumDDS"),
    ];
    for lib in &libs {
        let file = lib.file_name()?.to_string_lossy().into_owned();
        let Some((stem, name)) = KNOWN.iter().find(|(stem, _)| file.starts_with(stem)) else {
            continue;
        };
        let header = match *stem {
            "libfastdds.so" => {
                header_version(prefixes, "include/fastdds/config.hpp", "FASTDDS_VERSION_STR")
            }
            "libfastrtps.so" => {
                header_version(prefixes, "include/fastrtps/config.h", "FASTRTPS_VERSION_STR")
            }
            "libddsc.so" => package_version(prefixes, "cyclonedds"),
            "libzenohc.so" => package_version(prefixes, "zenoh_cpp_vendor"),
            _ => None,
        };
        let from_file = || {
            let real = std::fs::canonicalize(lib).ok()?;
            let n = real.file_name()?.to_string_lossy().into_owned();
            let v = n.split(".so.").nth(1)?.to_string();
            (v.split('.').count() >= 2).then_some(v)
        };
        return Some(Middleware {
            name: name.to_string(),
            version: header.or_else(from_file),
            library: lib.clone(),
        });
    }
    None
}

fn header_version(prefixes: &[PathBuf], rel: &str, define: &str) -> Option<String> {
    prefixes.iter().find_map(|p| {
        let text = std::fs::read_to_string(p.join(rel)).ok()?;
        let line = text.lines().find(|l| l.contains("#define") && l.contains(define))?;
        Some(line.split('"').nth(1)?.to_string())
    })
}

impl Ros2Facts {
    /// An installation and the discovery a node of it uses.
    pub fn of(i: &Installation, net: &Ros2Network) -> Ros2Facts {
        Ros2Facts {
            distro: i.distro.clone(),
            rcl_version: i.rcl_version.clone(),
            rmw: i.rmw.clone(),
            rmw_version: i.rmw_version.clone(),
            middleware: i.middleware.as_ref().map(|m| m.name.clone()),
            middleware_version: i.middleware.as_ref().and_then(|m| m.version.clone()),
            prefix: i.prefix.display().to_string(),
            found_by: i.found_by.clone(),
            abi: i.abi,
            discovery: net.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(root: &Path) -> Env {
        Env {
            opt_ros: root.join("opt_ros"),
            default_prefix: root.join("default"),
            ..Env::default()
        }
    }

    /// A fake prefix: rcl's package.xml and a librcl.so that is an empty file (enough for
    /// `locate`; `describe` needs a real ELF).
    fn fake(p: &Path, rcl: &str) {
        std::fs::create_dir_all(p.join("share/rcl")).unwrap();
        std::fs::create_dir_all(p.join("lib")).unwrap();
        std::fs::write(
            p.join("share/rcl/package.xml"),
            format!("<package><version>{rcl}</version></package>"),
        )
        .unwrap();
        std::fs::write(p.join("lib/librcl.so"), b"").unwrap();
    }

    #[test]
    fn nothing_found_is_one_line_naming_every_place_looked() {
        let d = tempfile::tempdir().unwrap();
        let e = find(None, None, &env(d.path())).unwrap_err();
        assert!(!e.contains('\n'));
        for what in
            ["AMENT_PREFIX_PATH (unset)", "opt_ros/* (none)", "scripts/setup.sh", "--ros2-prefix"]
        {
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    #[test]
    fn the_search_order_is_flag_environment_opt_ros_default() {
        let d = tempfile::tempdir().unwrap();
        let mut e = env(d.path());
        fake(&e.default_prefix, "10.1.3");
        assert_eq!(locate(None, &e).unwrap().1, "rtlab's default");
        fake(&e.opt_ros.join("jazzy"), "9.2.0");
        assert_eq!(locate(None, &e).unwrap().1, format!("{}/jazzy", e.opt_ros.display()));
        // two distributions: ROS_DISTRO picks, else one line naming both
        fake(&e.opt_ros.join("humble"), "5.3.7");
        let err = locate(None, &e).unwrap_err();
        assert!(err.contains("humble, jazzy"), "{err}");
        e.ros_distro = Some("humble".into());
        assert!(locate(None, &e).unwrap().1.contains("humble (ROS_DISTRO)"));
        // AMENT_PREFIX_PATH: the prefix with rcl first, the overlays kept for libraries
        let ws = d.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        e.ament_prefix_path =
            Some(format!("{}:{}", ws.display(), e.opt_ros.join("jazzy").display()));
        let (prefixes, by) = locate(None, &e).unwrap();
        assert_eq!(by, "AMENT_PREFIX_PATH");
        assert_eq!(prefixes, vec![e.opt_ros.join("jazzy"), ws.clone()]);
        // the flag wins; a flag naming no installation is refused, naming it
        assert_eq!(locate(Some(&e.default_prefix), &e).unwrap().1, "--ros2-prefix");
        let err = locate(Some(&ws), &e).unwrap_err();
        assert!(err.contains(&ws.display().to_string()) && err.contains("not a ROS 2"), "{err}");
    }

    #[test]
    fn rcl_versions_map_to_abis_and_distributions() {
        assert_eq!(Abi::of_rcl("5.3.7"), Some(Abi::Humble));
        assert_eq!(Abi::of_rcl("9.2.0"), Some(Abi::Jazzy));
        assert_eq!(Abi::of_rcl("10.1.3"), Some(Abi::Kilted));
        assert_eq!(Abi::of_rcl("6.0.3"), None);
        assert_eq!(Abi::of_rcl("x"), None);
        assert_eq!(Abi::distro_of_rcl("10.1.3"), Some("kilted"));
        assert_eq!(Abi::distro_of_rcl("10.3.0"), None);
        assert!(!Abi::Humble.has_discovery_range() && Abi::Jazzy.has_discovery_range());
    }

    #[test]
    fn an_unchecked_rcl_abi_is_refused_in_one_line_unless_asked() {
        let d = tempfile::tempdir().unwrap();
        let mut e = env(d.path());
        fake(&e.default_prefix, "6.0.3");
        let err = find(None, None, &e).unwrap_err();
        assert!(err.contains("rcl 6.0.3") && err.contains(ABI_UNCHECKED_ENV), "{err}");
        // asked: it goes on to the libraries (this fake librcl.so is no ELF file)
        e.abi_unchecked = true;
        let err = find(None, None, &e).unwrap_err();
        assert!(err.contains("librcl.so"), "{err}");
    }

    #[test]
    fn package_versions_are_read_from_package_xml() {
        let d = tempfile::tempdir().unwrap();
        fake(d.path(), " 10.1.3 ");
        assert_eq!(package_version(&[d.path().to_path_buf()], "rcl").as_deref(), Some("10.1.3"));
        assert_eq!(package_version(&[d.path().to_path_buf()], "nothing"), None);
    }

    #[test]
    fn wheel_library_directories_are_found_beside_lib() {
        let d = tempfile::tempdir().unwrap();
        let sp = d.path().join("lib/python3.11/site-packages");
        for n in ["ros_rcl.libs", "ros_fastdds.libs", "numpy.libs", "rclpy"] {
            std::fs::create_dir_all(sp.join(n)).unwrap();
        }
        let dirs = lib_dirs(&[d.path().to_path_buf()]);
        assert_eq!(
            dirs,
            vec![d.path().join("lib"), sp.join("ros_fastdds.libs"), sp.join("ros_rcl.libs")]
        );
    }
}
