//! The probe registry: every probe kind rtlab has, one line each, and the lookup by name.
//!
//! Contract: a new probe is one module in `probes/` and one line in [`PROBES`]; nothing
//! below the registry imports it back (the probes know their own kind, not the list).

use crate::probe::ProbeKind;

/// Every probe rtlab has: one line each.
pub const PROBES: &[ProbeKind] = &[
    crate::probes::timer::KIND,
    crate::probes::udp::KIND,
    crate::probes::pubsub::KIND,
    crate::probes::observe::KIND,
    crate::probes::cyclic::KIND,
    crate::probes::noise::KIND,
    crate::probes::trace::KIND,
];

/// A probe kind by name.
pub fn kind(name: &str) -> Option<&'static ProbeKind> {
    PROBES.iter().find(|k| k.kind == name)
}

/// The names, for error messages.
pub fn kind_names() -> String {
    PROBES.iter().map(|k| k.kind).collect::<Vec<_>>().join(", ")
}
