//! A probe's use of the far side: the link (its own, or the one a scenario case opened for
//! its far load and profile), the two addresses of the link, the far kernel counters, and
//! the `far` section of the result document.
//!
//! Contract: [`FarRun::start`] checks, before anything is measured, that the far host can do
//! what is asked (its tools, the real-time priority) and says in one line what it lacks;
//! [`FarRun::finish`] stops the far sampling and, for its own link, restores the far host
//! (the link's drop) — a case's link is finished by the executor after the probe.

use super::link::{FarLink, REQUEST_TIMEOUT};
use super::protocol::{Facts, Request};
use super::{Clocks, FarSpec};
use crate::error::LabError;
use rtlab_core::evidence::WindowCounters;
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::FarSide;

enum Link<'a> {
    Own(Box<FarLink>),
    Borrowed(&'a FarLink),
}

/// The far side while a probe measures.
pub struct FarRun<'a> {
    link: Link<'a>,
    pub facts: Facts,
    /// This host's address on the link.
    pub near: String,
    /// The far host's address on the link.
    pub far: String,
    pub clocks: Clocks,
    sampling: bool,
    pub notes: Vec<String>,
    /// Why the far side stopped answering during the run (a probe that saw it says so).
    pub lost: Option<String>,
}

/// An address with a port (`[v6]:port` for IPv6).
pub fn with_port(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

impl<'a> FarRun<'a> {
    /// Use the case's link (`ctx_link`) or open one to `spec`; `near_netns`: where this
    /// process's measuring sockets are; `rt`: the far roles' real-time settings (checked there);
    /// `tools`: programs the far side will run; `counters_window_ns`: sample the far kernel
    /// counters per window of this width.
    pub fn start(
        ctx_link: Option<&'a FarLink>,
        spec: &FarSpec,
        near_netns: Option<&str>,
        synced_clocks: bool,
        rt: &RtSettings,
        tools: &[&str],
        counters_window_ns: Option<i64>,
    ) -> Result<FarRun<'a>, LabError> {
        let link = match ctx_link {
            Some(l) => Link::Borrowed(l),
            None => Link::Own(Box::new(FarLink::open(spec)?)),
        };
        let l = match &link {
            Link::Own(l) => l.as_ref(),
            Link::Borrowed(l) => l,
        };
        let facts = l.facts()?;
        let (near, far) = l.addresses(&facts, near_netns)?;
        l.request(
            Request::Check {
                tools: tools.iter().map(|t| t.to_string()).collect(),
                policy: rt.policy,
                priority: rt.priority,
            },
            REQUEST_TIMEOUT,
        )?;
        let clocks = Clocks::of(spec, synced_clocks);
        FarRun::begin(link, facts, (near, far), clocks, counters_window_ns)
    }

    /// A far side that needs no address on a link (`rtlab trace --far`: the application
    /// finds its peers itself): the case's link or its own to `spec`, the far counters
    /// sampled per window when given; the addresses are said as `-`.
    pub fn start_unaddressed(
        ctx_link: Option<&'a FarLink>,
        spec: &FarSpec,
        clocks: Clocks,
        counters_window_ns: Option<i64>,
    ) -> Result<FarRun<'a>, LabError> {
        let link = match ctx_link {
            Some(l) => Link::Borrowed(l),
            None => Link::Own(Box::new(FarLink::open(spec)?)),
        };
        let facts = match &link {
            Link::Own(l) => l.facts()?,
            Link::Borrowed(l) => l.facts()?,
        };
        let addresses = facts.ssh_addresses().unwrap_or_else(|| ("-".into(), "-".into()));
        FarRun::begin(link, facts, addresses, clocks, counters_window_ns)
    }

    fn begin(
        link: Link<'a>,
        facts: Facts,
        (near, far): (String, String),
        clocks: Clocks,
        counters_window_ns: Option<i64>,
    ) -> Result<FarRun<'a>, LabError> {
        let l = match &link {
            Link::Own(l) => l.as_ref(),
            Link::Borrowed(l) => l,
        };
        let mut notes = Vec::new();
        if facts.version != super::protocol::version() {
            notes.push(format!(
                "the far host runs rtlab {} and this one {} (same protocol)",
                facts.version,
                super::protocol::version()
            ));
        }
        if let Some(r) = &l.hello.restored {
            notes.push(format!("far agent at start: {r}"));
        }
        let sampling = match counters_window_ns {
            Some(w) => {
                l.request(Request::Counters { window_ns: w }, REQUEST_TIMEOUT)?;
                true
            }
            None => false,
        };
        Ok(FarRun { clocks, link, facts, near, far, sampling, notes, lost: None })
    }

    pub fn link(&self) -> &FarLink {
        match &self.link {
            Link::Own(l) => l,
            Link::Borrowed(l) => l,
        }
    }

    /// The document's `far` section; the far counters stopped; an own link finished (the far
    /// host restored).
    pub fn finish(mut self) -> FarSide {
        let mut notes = std::mem::take(&mut self.notes);
        let lost_seen = self.lost.take();
        let l = self.link();
        let mut lost = lost_seen.or_else(|| l.ended());
        let mut counters: Option<WindowCounters> = None;
        if self.sampling {
            match l.ask(Request::StopCounters, REQUEST_TIMEOUT) {
                Ok(c) => counters = Some(c),
                Err(e) => {
                    lost.get_or_insert_with(|| e.to_string());
                    notes.push(format!("far kernel counters: {e}"))
                }
            }
        }
        let mut side = FarSide {
            link: l.spec.to_string(),
            host: self.facts.host.clone(),
            version: self.facts.version.clone(),
            near_address: self.near.clone(),
            far_address: self.far.clone(),
            clocks: serde_json::to_value(self.clocks)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            environment: self.facts.environment.clone(),
            counters,
            profile: None,
            load: None,
            notes: Vec::new(),
            link_lost: None,
        };
        if let Link::Own(own) = self.link {
            match own.finish() {
                Ok(f) => {
                    side.profile = f.profile;
                    side.load = f.load;
                    notes.extend(f.notes);
                }
                Err(e) => {
                    lost.get_or_insert_with(|| e.to_string());
                    notes.push(format!("finishing the far side: {e}"))
                }
            }
            drop(own);
        }
        side.notes = notes;
        side.link_lost = lost;
        side
    }
}
