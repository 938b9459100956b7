//! What a case cost, attached to its result document: the windows its measuring threads
//! opened (rtlab-sys `usage`), this process's max RSS, the warnings of real-time threads
//! that page-faulted or were preempted inside their window, and notes on what could not be
//! counted.
//!
//! Contract: called around the one `measure` of a case (the executor), never while it
//! measures; one case is measured at a time in a process.

use rtlab_core::cost::{Cost, CostWindow};
use rtlab_core::schema::ResultDocument;
use rtlab_core::warnings::cost_warnings;

/// Forget windows left from before this case (a case that failed half-way).
pub fn before_case() {
    let _ = rtlab_sys::usage::take_windows();
    FAR.lock().unwrap_or_else(|e| e.into_inner()).clear();
    FAR_REFUSED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The case's cost from the windows measured since [`before_case`], into `doc` with its
/// warnings.
pub fn attach(doc: &mut ResultDocument) {
    let windows = rtlab_sys::usage::take_windows();
    let mut notes = Vec::new();
    if windows.is_empty() {
        notes.push("no measuring thread reported its window: nothing to count".to_string());
    }
    if windows.iter().any(|w| w.groups.is_empty()) {
        notes.push("/proc/self/task was not readable: the process's threads by group are missing, the CPU figures are the measuring threads' alone".to_string());
    }
    let far = std::mem::take(&mut *FAR.lock().unwrap_or_else(|e| e.into_inner()));
    notes.extend(std::mem::take(&mut *FAR_REFUSED.lock().unwrap_or_else(|e| e.into_inner())));
    if doc.far.is_some() && far.is_empty() {
        notes.push("the far side reported no cost (an agent of an rtlab before cost, or a far side with no measuring thread)".to_string());
    }
    let in_processes =
        doc.streams.iter().any(|s| s.labels.get("placement").is_some_and(|p| p == "processes"));
    if in_processes && windows.iter().all(|w| w.processes.is_empty()) && doc.far.is_none() {
        notes.push(
            "no role process reported its cost (an rtlab before cost, or roles in this process)"
                .to_string(),
        );
    }
    let cost = Cost {
        windows,
        max_rss_kib: rtlab_sys::usage::max_rss_kib(std::process::id()),
        notes,
        far,
        rss: Vec::new(),
    };
    doc.warnings.extend(cost_warnings(&cost).iter().map(|w| w.to_warning()));
    doc.cost = Some(cost);
}

static FAR: std::sync::Mutex<Vec<CostWindow>> = std::sync::Mutex::new(Vec::new());
static FAR_REFUSED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A window the far side reported (its reflector's, a role process's there), checked: a
/// window that breaks [`CostWindow::check`] is refused with one note, never trusted.
pub fn far_window(w: CostWindow) {
    match w.check() {
        Ok(()) => {
            let mut far = FAR.lock().unwrap_or_else(|e| e.into_inner());
            if far.len() < rtlab_core::cost::FAR_LIMITS.0 {
                far.push(w);
            }
        }
        Err(why) => FAR_REFUSED.lock().unwrap_or_else(|e| e.into_inner()).push(why),
    }
}
