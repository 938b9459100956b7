//! rtlab-tune: real-time profiles and machine checks (the machine's file tree, the journal
//! that always restores, sessions and the machine lock are rtlab-host's; spike evidence is
//! rtlab-evidence's, loads are rtlab-load's).
//!
//! Contract: every system change goes through an `rtlab_host::session::Session`, which
//! journals it (fsync'd) before making it and puts it back on drop, on panic, or later
//! through `rtlab_host::journal::restore_journal` after a kill -9. Everything takes an
//! `rtlab_host::host::Host`, so the logic is tested against a fake sysfs/procfs tree without
//! root. Nothing here prints.
//!
//! Profiles come from one registry ([`profile::builtin_names`], [`profile::resolve`]).
//! Errors are typed (thiserror); each error that a machine's lack can cause has `missing()`,
//! Some for a missing privilege, kernel feature or tool (the lab skips such a case instead
//! of failing).

#![forbid(unsafe_code)]

pub mod check;
pub mod profile;
