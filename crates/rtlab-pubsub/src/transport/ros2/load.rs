//! Loading a ROS 2 installation into this process, once: its libraries by full path,
//! dependencies first ([`super::elf::closure`]), then the functions rtlab calls
//! ([`rtlab_bindings::rcl::resolve`]).
//!
//! What is loaded: the closure of `librcl.so`, the RMW library, `librmw_implementation.so`
//! where there is one (it then loads the RMW by name: `RMW_IMPLEMENTATION` is set to the
//! chosen one first, and finds it already loaded), `sensor_msgs`' C message and type support
//! libraries, and every type support library of the message packages an RMW looks up by
//! name at run time (`sensor_msgs`, `std_msgs`, `builtin_interfaces`, `rmw_dds_common`,
//! `rcl_interfaces`, `type_description_interfaces`, `service_msgs`). The package registry's
//! wheels link Python bindings into rcl (`*__rosidl_generator_py.so`, which name Python's
//! symbols without linking it): for them the installation's `libpython3.X` is loaded first,
//! globally (nothing of Python is started).
//!
//! Contract: one installation and one RMW per process (a second, different one is refused in
//! one line); nothing is unloaded; a Fast DDS under the RMW is claimed with
//! [`crate::dl::claim_fast_dds`] before anything is loaded. Nothing here prints.

use super::elf;
use super::install::Installation;
use crate::dl::{Bind, Library};
use rtlab_bindings::rcl::{self, ffi::Api};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The message packages whose type support libraries an RMW may look up by name.
const MESSAGE_PACKAGES: [&str; 7] = [
    "sensor_msgs",
    "std_msgs",
    "builtin_interfaces",
    "rmw_dds_common",
    "rcl_interfaces",
    "type_description_interfaces",
    "service_msgs",
];
const TYPE_SUPPORTS: [&str; 7] = [
    "rosidl_generator_c",
    "rosidl_typesupport_c",
    "rosidl_typesupport_cpp",
    "rosidl_typesupport_introspection_c",
    "rosidl_typesupport_introspection_cpp",
    "rosidl_typesupport_fastrtps_c",
    "rosidl_typesupport_fastrtps_cpp",
];

/// ROS 2 as loaded in this process.
pub struct Loaded {
    pub api: Api,
    pub installation: Installation,
    /// What the loaded RMW says it is (`rmw_get_implementation_identifier`).
    pub identifier: String,
    /// How many libraries were loaded, and libpython when it was.
    pub libraries: usize,
    pub python: Option<PathBuf>,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();
static LOADING: Mutex<()> = Mutex::new(());

/// Load `inst` into this process (once), or say why not.
pub fn load(inst: &Installation) -> Result<&'static Loaded, String> {
    let _one_at_a_time = LOADING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = LOADED.get() {
        let same = l.installation.prefix == inst.prefix && l.installation.rmw == inst.rmw;
        return if same {
            Ok(l)
        } else {
            Err(format!(
                "ros2: this process already loaded {} from {}; {} from {} cannot be loaded beside it (one ROS 2 and one RMW per process)",
                l.installation.rmw,
                l.installation.prefix.display(),
                inst.rmw,
                inst.prefix.display()
            ))
        };
    }
    let loaded = load_now(inst)?;
    Ok(LOADED.get_or_init(|| loaded))
}

/// The directories of `LD_LIBRARY_PATH` (libraries an installation takes from elsewhere).
fn ld_library_path() -> Vec<PathBuf> {
    std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect()
}

fn load_now(inst: &Installation) -> Result<Loaded, String> {
    if let Some(who) = inst.fast_dds() {
        crate::dl::claim_fast_dds(&who).map_err(|e| format!("ros2: {e}"))?;
    }
    let mut dirs = inst.lib_dirs.clone();
    dirs.extend(ld_library_path());
    let find = |name: &str| dirs.iter().map(|d| d.join(name)).find(|p| p.is_file());
    let rcl = find("librcl.so")
        .ok_or_else(|| format!("ros2: librcl.so not in {}", inst.prefix.display()))?;
    let mut roots = vec![rcl.clone(), inst.rmw_library.clone()];
    if !inst.rmw_fixed {
        if let Some(chooser) = find("librmw_implementation.so") {
            roots.push(chooser);
            // rmw_implementation loads the RMW named here (by name: found loaded)
            std::env::set_var("RMW_IMPLEMENTATION", &inst.rmw);
        }
    }
    roots.push(find("librosidl_runtime_c.so").ok_or("ros2: librosidl_runtime_c.so not found")?);
    for pkg in MESSAGE_PACKAGES {
        for ts in TYPE_SUPPORTS {
            if let Some(p) = find(&format!("lib{pkg}__{ts}.so")) {
                roots.push(p);
            }
        }
    }
    let order = elf::closure(&roots, &dirs).map_err(|e| format!("ros2: reading libraries: {e}"))?;
    let python = if order.iter().any(|p| is_python_binding(p)) {
        let lib = libpython(inst).ok_or_else(|| {
            format!(
                "ros2: the libraries in {} name Python's symbols (the package registry's wheels) and no libpython3 was found for them: install libpython3.11 (scripts/setup.sh does)",
                inst.prefix.display()
            )
        })?;
        Library::open(&lib, Bind::LazyGlobal)
            .map_err(|e| format!("ros2: loading {}: {e}", lib.display()))?;
        Some(lib)
    } else {
        None
    };
    let mut libs: Vec<(PathBuf, Library)> = Vec::with_capacity(order.len());
    for p in &order {
        let l = Library::open(p, Bind::LazyLocal)
            .map_err(|e| format!("ros2: loading {}: {e}", p.display()))?;
        libs.push((p.clone(), l));
    }
    let handle = |p: &Path| -> Result<&Library, String> {
        libs.iter()
            .find(|(q, _)| q == p)
            .map(|(_, l)| l)
            .ok_or_else(|| format!("ros2: {} was not loaded", p.display()))
    };
    let by_name = |name: &str| -> Result<&Library, String> {
        let p = find(name)
            .ok_or_else(|| format!("ros2: {name} not found in {}", inst.prefix.display()))?;
        handle(&p)
    };
    let api = rcl::resolve(&rcl::Libraries {
        rcl: handle(&rcl)?,
        rmw: handle(&inst.rmw_library)?,
        type_support: by_name("libsensor_msgs__rosidl_typesupport_c.so")?,
        message: by_name("libsensor_msgs__rosidl_generator_c.so")?,
        runtime: by_name("librosidl_runtime_c.so")?,
    })?;
    let identifier = rcl::rmw_identifier(&api);
    Ok(Loaded { api, installation: inst.clone(), identifier, libraries: libs.len(), python })
}

/// The package registry wheels' Python bindings, linked into their rcl.
fn is_python_binding(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n.to_string_lossy().ends_with("__rosidl_generator_py.so"))
}

/// The libpython the installation's Python bindings were built for: `lib/python3.X` of the
/// prefix gives X; the venv's interpreter (`pyvenv.cfg` `home`) or the system has it.
fn libpython(inst: &Installation) -> Option<PathBuf> {
    let version = std::fs::read_dir(inst.prefix.join("lib")).ok()?.flatten().find_map(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.strip_prefix("python3.")
            .filter(|v| v.chars().all(|c| c.is_ascii_digit()))
            .map(String::from)
    })?;
    let file = format!("libpython3.{version}.so.1.0");
    let mut places: Vec<PathBuf> = Vec::new();
    if let Ok(cfg) = std::fs::read_to_string(inst.prefix.join("pyvenv.cfg")) {
        if let Some(home) = cfg.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "home").then(|| PathBuf::from(v.trim()))
        }) {
            places.push(home.join("../lib").join(&file));
        }
    }
    for d in
        ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib"]
    {
        places.push(Path::new(d).join(&file));
    }
    places.into_iter().find(|p| p.is_file())
}
