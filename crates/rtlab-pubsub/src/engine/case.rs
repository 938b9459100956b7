//! One case (a payload, a rate, a subscriber count) from set-up to its result, in named
//! steps ([`CaseSetup::run`]): its budget (messages, time, deadline), the pong receivers
//! of a round trip, the roles, the ready/warm settle loop (a publisher by hand: waiting for
//! the subscribers the middleware matched), the measured phase (open loop on the grid, or
//! closed loop), stop and collect; then its streams and result ([`super::streams`], the
//! same `CaseSetup`).
//!
//! Contract: every recorder is allocated before the measured phase, which runs on an app
//! thread of its own ([`super::loops`]); threads that use the case's ports are joined before
//! the ports go, also on an error path ([`JoinOnDrop`], [`Roles`]).

use super::config::{Mode, PubsubConfig, Schedule};
use super::loops::{
    closed_loop, receive_loop, send_loop, warm_watch, ClosedLoop, Tally, Warmup,
    PUBLISHER_SPIKE_SOURCE,
};
use super::outcome::{CaseResult, MatchedSubscribers, ProbeError};
use super::placement::{start_role, FarPlacement, Launcher, Roles};
use super::role::{ReceiverReport, RoleConfig, RoleEvent, RoleKind};
use super::spec::TransportSpec;
use super::threads::{apply_thread_priorities, with_middleware, JoinOnDrop, RtUse};
use crate::transport::{Publisher, Reliability, Subscriber, Transport, WARMUP_BIT};
use rtlab_core::sink::{Recorder, RecorderConfig};
use rtlab_sys::clock::monotonic_ns;
use rtlab_sys::sched::spawn_rt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

/// How long role start-up and warm-up (discovery) may take before the case fails.
pub const SETUP_TIMEOUT_NS: i64 = 30_000_000_000;
/// Warm-up messages are sent at least this far apart until every subscriber got one (and
/// never faster than the case's period, nor than 100 MB/s, so that discovery is not flooded).
const WARMUP_PERIOD_NS: i64 = 10_000_000;

fn warmup_period(period_ns: i64, len: usize) -> i64 {
    WARMUP_PERIOD_NS.max(period_ns).max(len as i64 * 10)
}

/// The events of this process's own pong receivers are tagged `PONG_EVENTS + i`; a role's
/// are tagged `i`.
const PONG_EVENTS: usize = 1000;

/// The events of a case's roles and pong receivers, tagged with their index.
type Events = (usize, RoleEvent);

/// One case over an open transport.
pub(super) struct CaseSetup<'a> {
    pub(super) far: Option<&'a FarPlacement<'a>>,
    pub(super) cfg: &'a PubsubConfig,
    pub(super) transport: Arc<dyn Transport>,
    pub(super) role_spec: TransportSpec,
    pub(super) in_process: bool,
    pub(super) topic: String,
    pub(super) len: usize,
    pub(super) period: i64,
    pub(super) n: usize,
    /// Labels of every stream besides the case's own (ros2: `rmw`, `ros_distro`).
    pub(super) labels: &'a [(&'static str, String)],
}

pub(super) fn window_capacity(duration_ns: i64, window_ns: i64) -> usize {
    ((duration_ns / window_ns.max(1)) as usize + 4).clamp(16, 1 << 16)
}

/// A recorder for a case of `duration_ns`: samples above `deadline_ns` are missed, windows
/// of `window_ns`.
fn recorder_config(deadline_ns: i64, window_ns: i64, duration_ns: i64) -> RecorderConfig {
    RecorderConfig {
        deadline_ns,
        window_ns,
        window_capacity: window_capacity(duration_ns, window_ns),
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    }
}

/// What a case may spend.
pub(super) struct Budget {
    /// Closed loop: as many round trips as fit in the case (or its count); no grid.
    pub(super) closed: bool,
    /// Messages to send (closed loop without a count: u64::MAX, by time only).
    pub(super) count: u64,
    /// The measured phase's length.
    pub(super) duration_ns: i64,
    /// Samples above it are missed deadlines.
    pub(super) deadline_ns: i64,
}

/// A round trip's pong receivers, threads of this process (one per subscriber), and their
/// stop flag. Fields drop in this order: the watchers, then the receivers.
struct Pongs {
    /// Closed loop: each watches its port until every receiver is warm, then hands it back.
    watchers: JoinOnDrop<Box<dyn Subscriber>>,
    /// Periodic: each receives until stopped, then returns its report.
    receivers: JoinOnDrop<ReceiverReport>,
    stop: Arc<AtomicBool>,
    /// Set once every receiver is warm: the closed loop's watchers hand their ports back.
    settled: Arc<AtomicBool>,
}

impl Pongs {
    /// Closed loop, once settled: the watchers' ports, for the pinger's own thread.
    fn take_ports(&mut self) -> Result<Vec<Box<dyn Subscriber>>, ProbeError> {
        std::mem::take(&mut self.watchers.threads)
            .into_iter()
            .map(|t| t.join())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ProbeError::Setup("a pong receiver thread panicked".into()))
    }
}

/// What the measured phase sent.
pub(super) struct Measured {
    pub(super) published: u64,
    pub(super) overruns: u64,
    /// The publisher's send lateness (None in closed loop: no grid).
    pub(super) lateness: Option<Recorder>,
}

impl CaseSetup<'_> {
    /// Set up, measure and collect the case.
    pub(super) fn run(
        &self,
        launcher: Launcher,
        stop: &Arc<AtomicBool>,
    ) -> Result<CaseResult, ProbeError> {
        let cfg = self.cfg;
        let b = self.budget();
        let (tx, rx) = mpsc::channel::<Events>();
        let mut publisher = self.transport.publisher(&self.out_topic(), &cfg.qos, self.len)?;
        // roundtrip: the pong receivers live here, one thread each, started before the echoes
        let mut pongs = self.start_pongs(&b, &tx)?;
        // middleware threads exist once ports do (Cyclone starts `recv` lazily)
        let thread_priorities_set = apply_thread_priorities(
            &with_middleware(&cfg.thread_priorities, cfg.middleware_priority, &*self.transport),
            &cfg.rt,
        )
        .map_err(ProbeError::Invalid)?;
        let mut roles = self.start_roles(&b, &tx, launcher)?;
        drop(tx);
        let mut reports: Vec<Option<ReceiverReport>> = vec![None; self.n];
        let setup_end = self.settle(publisher.as_mut(), &rx, stop, &mut reports)?;
        pongs.settled.store(true, Ordering::Relaxed);
        // a publisher by hand cannot know its subscribers' reports, but the middleware knows
        // whom it matched: it waits for one, as a ping waits for its pong
        let mut matched_subscribers = if cfg.by_hand.is_some() && cfg.mode == Mode::Oneway {
            Some(self.wait_for_subscribers(publisher.as_mut(), stop, setup_end)?)
        } else {
            None
        };
        // let the last warm-up messages drain before measuring
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (measured, publisher) = if b.closed {
            let ports = pongs.take_ports()?;
            self.measure_closed_loop(publisher, ports, &b, stop, &mut reports)?
        } else {
            self.measure_open_loop(publisher, &b, stop)?
        };
        // a reliable publisher by hand closes only once its subscribers have everything (or
        // after a bounded wait, said): a slow subscriber's tail would go with the writer
        if let Some(m) = matched_subscribers.as_mut().filter(|m| m.count.is_some()) {
            if cfg.qos.reliability == Reliability::Reliable && !stop.load(Ordering::Relaxed) {
                let t = monotonic_ns();
                m.tail_acknowledged = publisher.wait_acknowledged(super::outcome::TAIL_ACK_NS);
                m.tail_waited_ns = monotonic_ns() - t;
            }
        }
        self.stop_and_collect(&mut roles, &mut pongs, &rx, &mut reports)?;
        drop(roles);
        // the role processes' cost, sent right before they ended (echoes: after the pongs)
        while let Ok((_, e)) = rx.recv_timeout(std::time::Duration::from_millis(300)) {
            if let RoleEvent::Cost(w) = e {
                rtlab_sys::usage::merge(*w);
            }
        }
        drop(publisher);
        self.result(reports, &b, measured, matched_subscribers, thread_priorities_set)
    }

    /// The case's messages, time and deadline: on the grid, the messages of the period (its
    /// time follows); closed loop, the case's time (and its count, if any).
    fn budget(&self) -> Budget {
        let cfg = self.cfg;
        let closed = cfg.schedule == Schedule::ClosedLoop;
        let (count, duration_ns) = if closed {
            (cfg.case_messages.unwrap_or(u64::MAX), cfg.case_duration_ns)
        } else {
            let c = cfg.messages_of(self.period);
            (c, c as i64 * self.period)
        };
        let deadline_ns = match (cfg.deadline_ns, closed) {
            (Some(d), _) => d,
            (None, true) => cfg.loss_timeout_ns,
            (None, false) => self.period,
        };
        Budget { closed, count, duration_ns, deadline_ns }
    }

    /// The topic this side publishes on: the data, or the pings.
    fn out_topic(&self) -> String {
        match (self.cfg.mode, self.cfg.by_hand.is_some()) {
            (Mode::Oneway, false) => format!("{}_data", self.topic),
            (Mode::Oneway, true) => self.topic.clone(),
            (Mode::Roundtrip, _) => format!("{}_ping", self.topic),
        }
    }

    /// What role `index` of this case does and where it listens.
    fn role_config(&self, kind: RoleKind, index: usize, duration_ns: i64) -> RoleConfig {
        let cfg = self.cfg;
        RoleConfig {
            transport: self.role_spec.clone(),
            kind,
            index,
            topic_in: match kind {
                RoleKind::Subscriber => format!("{}_data", self.topic),
                RoleKind::Echo => format!("{}_ping", self.topic),
            },
            topic_out: (kind == RoleKind::Echo).then(|| format!("{}_pong_{index}", self.topic)),
            qos: cfg.qos,
            wait: cfg.wait,
            echo: cfg.echo,
            max_len: self.len,
            deadline_ns: cfg.deadline_ns.unwrap_or(self.period),
            loss_timeout_ns: cfg.loss_timeout_ns,
            window_ns: cfg.window_ns,
            window_capacity: window_capacity(duration_ns, cfg.window_ns),
            run_timeout_ns: 2 * SETUP_TIMEOUT_NS + duration_ns + cfg.loss_timeout_ns,
            rt: cfg.rt.clone(),
            mlockall: cfg.rt.mlockall,
            thread_priorities: cfg.thread_priorities.clone(),
            middleware_priority: cfg.middleware_priority,
            stamp_clock: cfg.oneway_clock(),
            cost_window: self.cost_window(),
            spike: cfg.spike.clone(),
        }
    }

    /// Roundtrip: a pong receiver per subscriber on an app thread of this process, its
    /// events to `tx` as `PONG_EVENTS + i`: a receive loop (periodic), or a watcher until
    /// warm (closed loop: then the pinger's own thread takes the pongs). Oneway: none.
    fn start_pongs(&self, b: &Budget, tx: &mpsc::Sender<Events>) -> Result<Pongs, ProbeError> {
        let cfg = self.cfg;
        let stop = Arc::new(AtomicBool::new(false));
        let mut pongs = Pongs {
            watchers: JoinOnDrop::new(&stop),
            receivers: JoinOnDrop::new(&stop),
            stop,
            settled: Arc::new(AtomicBool::new(false)),
        };
        if cfg.mode != Mode::Roundtrip {
            return Ok(pongs);
        }
        for i in 0..self.n {
            let rc = self.role_config(RoleKind::Subscriber, i, b.duration_ns);
            let pong = if cfg.by_hand.is_some() {
                format!("{}_pong", self.topic)
            } else {
                format!("{}_pong_{i}", self.topic)
            };
            let sub = self.transport.subscriber(&pong, &cfg.qos, self.len)?;
            let events = tx.clone();
            let rs = pongs.stop.clone();
            let spec = cfg.rt.spec(&format!("rtlab-pong{i}"), 1 + i);
            if b.closed {
                // until warm; then the pinger's own thread takes the pongs
                let wait = cfg.wait;
                let done = pongs.settled.clone();
                let t = spawn_rt(&spec, move || {
                    let mut emit = |e: RoleEvent| {
                        let _ = events.send((PONG_EVENTS + i, e));
                    };
                    warm_watch(sub, wait, &rs, &done, &mut emit)
                })
                .map_err(|e| ProbeError::Rt(e.to_string()))?;
                pongs.watchers.threads.push(t);
                continue;
            }
            let t = spawn_rt(&spec, move || {
                let mut emit = |e: RoleEvent| {
                    let _ = events.send((PONG_EVENTS + i, e));
                };
                // cost: this thread's counters right before its loop and right after it
                let cost = rtlab_sys::usage::begin(&rc.cost_window);
                let r = receive_loop(sub, &rc, &rs, &mut emit);
                cost.end();
                r
            })
            .map_err(|e| ProbeError::Rt(e.to_string()))?;
            pongs.receivers.threads.push(t);
        }
        Ok(pongs)
    }

    /// The case's roles, subscribers (oneway) or echoes (roundtrip), their events to `tx`;
    /// none when the peer is run by hand elsewhere.
    fn start_roles(
        &self,
        b: &Budget,
        tx: &mpsc::Sender<Events>,
        launcher: Launcher,
    ) -> Result<Roles, ProbeError> {
        let kind = match self.cfg.mode {
            Mode::Oneway => RoleKind::Subscriber,
            Mode::Roundtrip => RoleKind::Echo,
        };
        let mut roles = Roles(Vec::new());
        if self.cfg.by_hand.is_none() {
            for i in 0..self.n {
                let rc = self.role_config(kind, i, b.duration_ns);
                roles.0.push(start_role(
                    rc,
                    tx.clone(),
                    launcher,
                    self.far,
                    self.in_process,
                    &self.transport,
                )?);
            }
        }
        Ok(roles)
    }

    /// Ready, then warm: warm-up messages until every receiver is warm ([`Warmup`]); by
    /// hand the peer is started elsewhere: a ping waits for its pongs, a publisher cannot
    /// know its subscribers and starts at once. A report that comes already goes to
    /// `reports`. Returns the end of the set-up time.
    fn settle(
        &self,
        publisher: &mut dyn Publisher,
        rx: &mpsc::Receiver<Events>,
        stop: &AtomicBool,
        reports: &mut [Option<ReceiverReport>],
    ) -> Result<i64, ProbeError> {
        let cfg = self.cfg;
        let by_hand = cfg.by_hand.is_some();
        let mut ready = vec![by_hand; self.n];
        let mut warm: Vec<Warmup> = (0..self.n)
            .map(|_| if by_hand && cfg.mode == Mode::Oneway { Warmup::Warm } else { Warmup::Cold })
            .collect();
        let setup_end = monotonic_ns() + SETUP_TIMEOUT_NS;
        let mut k = 0u64;
        let mut next_warm = monotonic_ns();
        while !(ready.iter().all(|r| *r) && warm.iter().all(|w| *w == Warmup::Warm)) {
            if stop.load(Ordering::Relaxed) {
                return Err(ProbeError::Setup("interrupted during set-up".into()));
            }
            let now = monotonic_ns();
            if now > setup_end {
                return Err(self.not_settled(&ready, &warm));
            }
            if ready.iter().all(|r| *r) && now >= next_warm {
                publisher.publish(WARMUP_BIT | k, monotonic_ns(), self.len)?;
                k += 1;
                next_warm = now + warmup_period(self.period, self.len);
            }
            match rx.recv_timeout(std::time::Duration::from_millis(2)) {
                Ok((i, e)) => {
                    let (i, own) =
                        if i >= PONG_EVENTS { (i - PONG_EVENTS, true) } else { (i, false) };
                    match e {
                        RoleEvent::Ready => ready[i] = true,
                        RoleEvent::Warm(j) => {
                            if own || cfg.mode == Mode::Oneway {
                                warm[i] = warm[i].arrived(j, k);
                            }
                        }
                        RoleEvent::Failed(why) => return Err(ProbeError::Setup(why)),
                        RoleEvent::Done(r) => reports[i] = r.map(|b| *b),
                        RoleEvent::Cost(w) => rtlab_sys::usage::merge(*w),
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ProbeError::Setup("every subscriber ended during set-up".into()))
                }
            }
        }
        Ok(setup_end)
    }

    /// The set-up time is over: which subscribers are not ready and warm, and how far they got.
    fn not_settled(&self, ready: &[bool], warm: &[Warmup]) -> ProbeError {
        let which = if !ready.iter().all(|r| *r) {
            "did not start"
        } else if warm.iter().any(|w| matches!(w, Warmup::Matched { .. })) {
            "received warm-up messages, but none sent after the first arrived (the path never became current)"
        } else {
            "received nothing (discovery failed?)"
        };
        let idx: Vec<String> = (0..self.n)
            .filter(|i| !(ready[*i] && warm[*i] == Warmup::Warm))
            .map(|i| i.to_string())
            .collect();
        ProbeError::Setup(format!(
            "{}: subscriber(s) {} {which} within {} s",
            self.transport.name(),
            idx.join(","),
            SETUP_TIMEOUT_NS / 1_000_000_000
        ))
    }

    /// The measured phase on the grid: the sender on an app thread of its own, its lateness
    /// into a recorder allocated here; then the loss timeout, so that late messages still
    /// count as late, not lost. Gives the publisher back.
    fn measure_open_loop(
        &self,
        mut publisher: Box<dyn Publisher>,
        b: &Budget,
        stop: &Arc<AtomicBool>,
    ) -> Result<(Measured, Box<dyn Publisher>), ProbeError> {
        let cfg = self.cfg;
        let sstop = stop.clone();
        let (len, period, count, clock) = (self.len, self.period, b.count, cfg.oneway_clock());
        // the publisher's lateness: preallocated here, filled on the sender thread
        let mut lateness =
            Recorder::new(&recorder_config(self.period, cfg.window_ns, b.duration_ns), None)
                .with_hook(
                    cfg.spike.as_ref().map(|h| h.for_source(PUBLISHER_SPIKE_SOURCE)).as_ref(),
                );
        let window = self.cost_window();
        let sender = spawn_rt(&cfg.rt.spec("rtlab-pub", 0), move || {
            // cost: this thread's counters right before its loop and right after it
            let cost = rtlab_sys::usage::begin(&window);
            let r = send_loop(publisher.as_mut(), len, period, count, clock, &sstop, &mut lateness);
            cost.end();
            rtlab_sys::usage::set_messages(&window, r.0);
            (r, publisher, lateness)
        })
        .map_err(|e| ProbeError::Rt(e.to_string()))?;
        let ((published, overruns, send_err), publisher, lateness) =
            sender.join().map_err(|_| ProbeError::Setup("the sender thread panicked".into()))?;
        if let Some(e) = send_err {
            return Err(e.into());
        }
        // late messages still count as late, not lost, within the loss timeout
        rtlab_sys::clock::sleep_for(cfg.loss_timeout_ns);
        Ok((Measured { published, overruns, lateness: Some(lateness) }, publisher))
    }

    /// The measured phase in closed loop: the pinger's own app thread publishes and takes
    /// the pongs on `ports`, into tallies allocated here; their reports go to `reports`.
    /// Gives the publisher back.
    fn measure_closed_loop(
        &self,
        mut publisher: Box<dyn Publisher>,
        ports: Vec<Box<dyn Subscriber>>,
        b: &Budget,
        stop: &Arc<AtomicBool>,
        reports: &mut [Option<ReceiverReport>],
    ) -> Result<(Measured, Box<dyn Publisher>), ProbeError> {
        let cfg = self.cfg;
        let sstop = stop.clone();
        // every recorder allocated here, filled on the pinger's thread
        let rcfg = recorder_config(b.deadline_ns, cfg.window_ns, b.duration_ns);
        let mut sides: Vec<Tally> =
            (0..self.n).map(|_| Tally::new(&rcfg, cfg.spike.as_ref())).collect();
        let lp = ClosedLoop {
            len: self.len,
            wait: cfg.wait,
            count: b.count,
            duration_ns: b.duration_ns,
            loss_timeout_ns: cfg.loss_timeout_ns,
        };
        let window = self.cost_window();
        let pinger = spawn_rt(&cfg.rt.spec("rtlab-pub", 0), move || {
            let mut subs = ports;
            // cost: this thread's counters right before its loop and right after it
            let cost = rtlab_sys::usage::begin(&window);
            let r = closed_loop(publisher.as_mut(), &mut subs, &mut sides, &lp, &sstop);
            cost.end();
            rtlab_sys::usage::set_messages(&window, r.0);
            (r, publisher, sides)
        })
        .map_err(|e| ProbeError::Rt(e.to_string()))?;
        let ((published, err), publisher, sides) =
            pinger.join().map_err(|_| ProbeError::Setup("the pinger thread panicked".into()))?;
        if let Some(e) = err {
            return Err(e.into());
        }
        for (i, side) in sides.into_iter().enumerate() {
            reports[i] = Some(side.report());
        }
        Ok((Measured { published, overruns: 0, lateness: None }, publisher))
    }

    /// Stop and collect: oneway, the roles are told to stop and their reports awaited (10 s
    /// past the loss timeout at most); roundtrip, the pong receivers here stop and report.
    fn stop_and_collect(
        &self,
        roles: &mut Roles,
        pongs: &mut Pongs,
        rx: &mpsc::Receiver<Events>,
        reports: &mut [Option<ReceiverReport>],
    ) -> Result<(), ProbeError> {
        let mut done = vec![false; self.n];
        match self.cfg.mode {
            Mode::Oneway => {
                for r in roles.0.iter_mut() {
                    r.stop();
                }
                let end = monotonic_ns() + 10_000_000_000 + self.cfg.loss_timeout_ns;
                while !done.iter().all(|d| *d) && monotonic_ns() < end {
                    match rx.recv_timeout(std::time::Duration::from_millis(20)) {
                        Ok((i, RoleEvent::Done(r))) if i < PONG_EVENTS => {
                            reports[i] = r.map(|b| *b);
                            done[i] = true;
                        }
                        Ok((i, RoleEvent::Failed(why))) if i < PONG_EVENTS => {
                            return Err(ProbeError::Setup(why))
                        }
                        Ok((_, RoleEvent::Cost(w))) => rtlab_sys::usage::merge(*w),
                        Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            }
            Mode::Roundtrip => {
                pongs.stop.store(true, Ordering::Relaxed);
                for (i, t) in pongs.receivers.threads.drain(..).enumerate() {
                    reports[i] = t.join().ok();
                }
            }
        }
        Ok(())
    }

    /// A publisher by hand: wait (until `setup_end`, as long as `stop` is not raised) until
    /// the middleware has matched at least one subscriber with `publisher`. A transport that
    /// cannot tell ([`Publisher::matched`] is None) publishes at once. No subscriber in the
    /// set-up time is an error: nothing that was asked (a subscriber's messages) could be
    /// measured.
    ///
    /// Reliable, the match then settles: the publisher's library matched the subscriber when
    /// it learnt of it, but the subscriber may not have learnt of the publisher yet (each side
    /// hears of the other in its own discovery message); it drops what comes before, and a
    /// reliable protocol repairs it only after its next heartbeat (Fast DDS 2.9: 3 s), late,
    /// or never once the history moved on. So a warm-up message (sequence bit 63, which a
    /// subscriber does not measure) is published until every matched subscriber acknowledged
    /// it ([`Publisher::wait_acknowledged`]): a subscriber acknowledges only a publisher it
    /// matched, so from then on the path is current both ways.
    fn wait_for_subscribers(
        &self,
        publisher: &mut dyn Publisher,
        stop: &AtomicBool,
        setup_end: i64,
    ) -> Result<MatchedSubscribers, ProbeError> {
        let start = monotonic_ns();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(ProbeError::Setup("interrupted during set-up".into()));
            }
            match publisher.matched() {
                None => {
                    return Ok(MatchedSubscribers {
                        count: None,
                        waited_ns: 0,
                        settle_ns: 0,
                        tail_acknowledged: None,
                        tail_waited_ns: 0,
                    })
                }
                Some(n) if n > 0 => break,
                Some(_) => {}
            }
            if monotonic_ns() > setup_end {
                return Err(ProbeError::Setup(format!(
                    "{}: no subscriber of {} matched the publisher within {} s (is one running, on domain {} and this network? a reliable subscriber does not match a best-effort publisher: --reliability)",
                    self.transport.name(),
                    self.topic,
                    SETUP_TIMEOUT_NS / 1_000_000_000,
                    self.role_spec.domain.map_or("the default".to_string(), |d| d.to_string()),
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let waited_ns = monotonic_ns() - start;
        let settle_start = monotonic_ns();
        if self.cfg.qos.reliability == Reliability::Reliable {
            let mut k = 0u64;
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Err(ProbeError::Setup("interrupted during set-up".into()));
                }
                publisher.publish(WARMUP_BIT | k, monotonic_ns(), self.len)?;
                k += 1;
                let left = setup_end - monotonic_ns();
                match publisher.wait_acknowledged(left.clamp(0, WARMUP_PERIOD_NS * 10)) {
                    Some(true) | None => break,
                    Some(false) if left > 0 => {}
                    Some(false) => {
                        return Err(ProbeError::Setup(format!(
                            "{}: a subscriber of {} matched the publisher but did not acknowledge its messages within {} s (the path never became current)",
                            self.transport.name(),
                            self.topic,
                            SETUP_TIMEOUT_NS / 1_000_000_000
                        )))
                    }
                }
            }
        }
        let settle_ns = monotonic_ns() - settle_start;
        let count = publisher.matched();
        Ok(MatchedSubscribers {
            count,
            waited_ns,
            settle_ns,
            tail_acknowledged: None,
            tail_waited_ns: 0,
        })
    }
}
