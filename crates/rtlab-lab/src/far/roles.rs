//! Pub/sub roles on the far side: each role a process the agent starts there, its events
//! relayed over the link.
//!
//! Contract: a role's events reach the probe in order and always end with `Done` or `Failed`:
//! when the link dies first, a `Failed` naming why is sent in its place, so a case never
//! waits on a far host that is gone.

use super::link::{FarHandle, REQUEST_TIMEOUT};
use super::protocol::Request;
use rtlab_pubsub::engine::{parse_event, FarRole, FarRoles, RoleConfig, RoleEvent};
use std::sync::mpsc;

/// Starts roles through an agent.
pub struct AgentRoles {
    pub link: FarHandle,
}

struct AgentRole {
    link: FarHandle,
    role: u64,
}

impl FarRole for AgentRole {
    fn stop(&mut self) {
        // the agent closes its stdin: it reports, then ends; a dead link has nothing to stop
        let _ = self.link.request(Request::StopRole { role: self.role }, REQUEST_TIMEOUT);
    }
}

impl FarRoles for AgentRoles {
    fn start(
        &self,
        rc: &RoleConfig,
        events: mpsc::Sender<(usize, RoleEvent)>,
    ) -> Result<Box<dyn FarRole>, String> {
        let json = serde_json::to_string(rc).map_err(|e| e.to_string())?;
        let role = self.link.next_number();
        let lines = self.link.route_role(role);
        if let Err(e) = self.link.request(Request::Role { role, config: json }, REQUEST_TIMEOUT) {
            self.link.unroute_role(role);
            return Err(e.to_string());
        }
        let (index, link) = (rc.index, self.link.clone());
        std::thread::spawn(move || {
            let mut ended = false;
            for l in lines.iter() {
                if let Some(e) = parse_event(&l) {
                    // the far role's cost is the far side's, never this side's window
                    if let RoleEvent::Cost(w) = e {
                        crate::cost::far_window(*w);
                        continue;
                    }
                    ended = e.is_last();
                    let _ = events.send((index, e));
                    if ended {
                        break;
                    }
                }
            }
            link.unroute_role(role);
            if !ended {
                let why = link.ended().unwrap_or_else(|| "the link ended".into());
                let _ = events
                    .send((index, RoleEvent::Failed(format!("far side {}: {why}", link.spec))));
            }
        });
        Ok(Box::new(AgentRole { link: self.link.clone(), role }))
    }
}
