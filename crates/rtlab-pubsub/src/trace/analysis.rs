//! From the events of every traced process to the application's graph, its messages and its
//! chains.
//!
//! Contract: pure (no I/O). A publish is rcl's (`rcl_publish`, the instant the application
//! handed the message over) joined to the RMW's (`rmw_publish`, same thread, same message:
//! the source timestamp); a take is the RMW's (`rmw_take`, taken: the instant the message
//! left the middleware into the application). A take joins its publish by topic and source
//! timestamp, across processes (one host: one CLOCK_MONOTONIC). Per publisher and
//! subscription (an edge): each message's latency, and the publisher's messages it missed:
//! `lost` between the first and the last message it took, `before_first` before it (not yet
//! matched), `after_last` after it (in flight at the end, or after the subscription ended).
//! A node's publish follows its take when it comes next on the same thread (its callback
//! published it); chains follow those links, hop by hop, and their hops add up to the
//! end-to-end exactly. rcl's own topics (`/rosout`, `/parameter_events`) are left out.

use super::event::{Event, Kind};
use std::collections::{BTreeMap, HashMap};

/// The key of a far host's process `pid` (`rtlab trace --far`): its pid negated, so it never
/// meets a pid of this host's; [`host_pid`] gives back (far, pid).
pub fn far_key(pid: i32) -> i32 {
    -pid
}

/// A process key's host (true: the far one) and pid.
pub fn host_pid(key: i32) -> (bool, i32) {
    (key < 0, key.abs())
}

/// rcl's own topics: not the application's.
pub const RCL_TOPICS: &[&str] = &["/rosout", "/parameter_events"];

/// One traced process's events, in the order its ring held them.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcessEvents {
    /// Its pid: the key of its endpoints, nodes and callbacks (a far host's processes are
    /// keyed by their pid negated, [`far_key`]: two hosts, one key space).
    pub pid: i32,
    pub events: Vec<Event>,
}

/// A publisher or subscription: its process, node and topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub pid: i32,
    pub node: String,
    pub topic: String,
    /// rcl's handle (a publisher) or the RMW's (a subscription), unique in its process.
    pub handle: u64,
}

/// One message handed to rcl.
#[derive(Clone, Debug)]
pub struct Publish {
    pub publisher: usize,
    pub time_ns: i64,
    pub stamp: i64,
    pub tid: u32,
    pub cpu: Option<u16>,
}

/// One message taken from the middleware.
#[derive(Clone, Debug)]
pub struct Take {
    pub subscription: usize,
    pub time_ns: i64,
    pub stamp: i64,
    pub tid: u32,
    pub cpu: Option<u16>,
    /// The publish it joined (None: its publisher was not traced).
    pub publish: Option<usize>,
}

/// A publisher -> subscription pair that carried messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    pub publisher: usize,
    pub subscription: usize,
    /// (publish time, latency) of each message taken, in publish order.
    pub latencies: Vec<(i64, i64)>,
    pub lost: u64,
    pub before_first: u64,
    pub after_last: u64,
}

/// One message's way along a chain.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainMessage {
    /// The first publish's time.
    pub start_ns: i64,
    /// The hops' durations: middleware, node, middleware, ... (2n-1 for n topics).
    pub hops: Vec<i64>,
    pub end_to_end_ns: i64,
    /// The takes it crossed (indices into [`Analysis::takes`]), one per topic.
    pub takes: Vec<usize>,
}

/// A chain of topics and the messages that went along it.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    pub topics: Vec<String>,
    /// The hops' names: `/scan (middleware)`, `relay (node)`, ...
    pub hop_names: Vec<String>,
    pub messages: Vec<ChainMessage>,
    /// Messages of the first topic that did not reach the last (dropped on the way, or a
    /// node that does not publish for every input).
    pub incomplete: u64,
}

/// A callback's runs (where the client library reports callbacks: rclcpp).
#[derive(Clone, Debug, PartialEq)]
pub struct Callback {
    pub pid: i32,
    pub handle: u64,
    pub symbol: Option<String>,
    pub durations: Vec<i64>,
    /// (thread, start) of each run.
    pub starts: Vec<(u32, i64)>,
    /// From the take a run handled (the last take on its thread before it, after the run
    /// before it) to its start, per run that had one (the wait before the take is not seen:
    /// the RMW has no tracepoint at a message's arrival).
    pub dispatch: Vec<i64>,
}

/// Everything the events say.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    pub publishers: Vec<Endpoint>,
    pub subscriptions: Vec<Endpoint>,
    pub publishes: Vec<Publish>,
    pub takes: Vec<Take>,
    pub edges: Vec<Edge>,
    pub chains: Vec<Chain>,
    pub callbacks: Vec<Callback>,
    /// Nodes by process: (pid, full name).
    pub nodes: Vec<(i32, String)>,
    /// Takes whose publish was not in the trace.
    pub unjoined_takes: u64,
    /// publish -> the takes that joined it.
    pub takes_of: HashMap<usize, Vec<usize>>,
    /// take -> the publishes its node made from it.
    pub caused: HashMap<usize, Vec<usize>>,
}

/// One node: what it took and published, and how long it held a message (its take to the
/// publish that followed it on the same thread).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeStats {
    pub pid: i32,
    pub name: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub taken: u64,
    pub published: u64,
    /// take -> the publish it caused, per link.
    pub inside: Vec<i64>,
}

/// Every node with its inputs, outputs, counts and time inside, in the order they started.
pub fn nodes(a: &Analysis) -> Vec<NodeStats> {
    let mut out: Vec<NodeStats> = a
        .nodes
        .iter()
        .map(|(pid, name)| NodeStats { pid: *pid, name: name.clone(), ..NodeStats::default() })
        .collect();
    // each publisher's and subscription's node, found once
    let node_of = |e: &Endpoint| out.iter().position(|n| n.pid == e.pid && n.name == e.node);
    let sub_node: Vec<Option<usize>> = a.subscriptions.iter().map(node_of).collect();
    let pub_node: Vec<Option<usize>> = a.publishers.iter().map(node_of).collect();
    for (s, n) in a.subscriptions.iter().zip(&sub_node) {
        if let Some(&i) = n.as_ref() {
            if !out[i].inputs.contains(&s.topic) {
                out[i].inputs.push(s.topic.clone());
            }
        }
    }
    for (p, n) in a.publishers.iter().zip(&pub_node) {
        if let Some(&i) = n.as_ref() {
            if !out[i].outputs.contains(&p.topic) {
                out[i].outputs.push(p.topic.clone());
            }
        }
    }
    for t in &a.takes {
        if let Some(i) = sub_node[t.subscription] {
            out[i].taken += 1;
        }
    }
    for p in &a.publishes {
        if let Some(i) = pub_node[p.publisher] {
            out[i].published += 1;
        }
    }
    let mut links: Vec<(&usize, &Vec<usize>)> = a.caused.iter().collect();
    links.sort();
    for (&t, pubs) in links {
        if let Some(i) = sub_node[a.takes[t].subscription] {
            for &p in pubs {
                out[i].inside.push(a.publishes[p].time_ns - a.takes[t].time_ns);
            }
        }
    }
    out
}

/// A node's full name: `/ns/name` (a namespace of "": the name alone, as a probed process's
/// stand-in node `pid N`).
fn full_name(name: &str, ns: &str) -> String {
    if ns.is_empty() {
        return name.to_string();
    }
    let ns = ns.trim_end_matches('/');
    format!("{ns}/{name}")
}

fn own_topic(t: &str) -> bool {
    RCL_TOPICS.contains(&t)
}

/// Analyse every process's events; `chains` as asked (`--chain`), or found (empty).
pub fn analyse(processes: &[ProcessEvents], chains: &[Vec<String>]) -> Analysis {
    let mut a = Analysis::default();
    let mut open_callbacks: HashMap<(i32, u32), Vec<(u64, i64)>> = HashMap::new();
    let mut callbacks: BTreeMap<(i32, u64), Callback> = BTreeMap::new();
    for p in processes {
        let mut events: Vec<&Event> = p.events.iter().collect();
        events.sort_by_key(|e| e.time_ns);
        let mut nodes: HashMap<u64, String> = HashMap::new();
        let mut pubs: HashMap<u64, usize> = HashMap::new(); // rmw handle -> publisher
        let mut subs: HashMap<u64, usize> = HashMap::new(); // rmw handle -> subscription
        let mut pending: HashMap<u32, (u64, i64)> = HashMap::new(); // tid -> (message, time)
        for e in events {
            let [x, y, z, _] = e.args;
            match e.kind {
                Kind::NodeInit => {
                    let name = full_name(
                        e.names.first().map_or("?", |s| s),
                        e.names.get(1).map_or("/", |s| s),
                    );
                    a.nodes.push((p.pid, name.clone()));
                    nodes.insert(x, name);
                }
                Kind::PublisherInit | Kind::SubscriptionInit => {
                    let topic = e.names.first().cloned().unwrap_or_default();
                    if own_topic(&topic) {
                        continue;
                    }
                    let node = nodes.get(&y).cloned().unwrap_or_else(|| "?".into());
                    if e.kind == Kind::PublisherInit {
                        a.publishers.push(Endpoint { pid: p.pid, node, topic, handle: x });
                        pubs.insert(z, a.publishers.len() - 1);
                    } else {
                        a.subscriptions.push(Endpoint { pid: p.pid, node, topic, handle: z });
                        subs.insert(z, a.subscriptions.len() - 1);
                    }
                }
                Kind::RclPublish => {
                    pending.insert(e.tid, (y, e.time_ns));
                }
                Kind::RmwPublish => {
                    let Some(&publisher) = pubs.get(&x) else { continue };
                    let time_ns = match pending.remove(&e.tid) {
                        Some((msg, t)) if msg == y => t,
                        _ => e.time_ns,
                    };
                    a.publishes.push(Publish {
                        publisher,
                        time_ns,
                        stamp: z as i64,
                        tid: e.tid,
                        cpu: e.cpu,
                    });
                }
                Kind::RmwTake if e.flags & 1 == 1 => {
                    let Some(&subscription) = subs.get(&x) else { continue };
                    a.takes.push(Take {
                        subscription,
                        time_ns: e.time_ns,
                        stamp: z as i64,
                        tid: e.tid,
                        cpu: e.cpu,
                        publish: None,
                    });
                }
                Kind::CallbackStart => {
                    open_callbacks.entry((p.pid, e.tid)).or_default().push((x, e.time_ns));
                }
                Kind::CallbackEnd => {
                    let stack = open_callbacks.entry((p.pid, e.tid)).or_default();
                    if let Some(i) = stack.iter().rposition(|&(cb, _)| cb == x) {
                        let (_, start) = stack.remove(i);
                        let c =
                            callbacks.entry((p.pid, x)).or_insert_with(|| Callback::new(p.pid, x));
                        c.durations.push(e.time_ns - start);
                        c.starts.push((e.tid, start));
                    }
                }
                Kind::RclcppCallbackRegister => {
                    callbacks.entry((p.pid, x)).or_insert_with(|| Callback::new(p.pid, x)).symbol =
                        e.names.first().cloned();
                }
                _ => {}
            }
        }
    }
    a.callbacks = callbacks.into_values().filter(|c| !c.durations.is_empty()).collect();
    dispatch(&mut a);
    join(&mut a);
    link(&mut a);
    a.edges = edges(&a);
    let asked: Vec<Vec<String>> =
        if chains.is_empty() { found_chains(&a) } else { chains.to_vec() };
    a.chains = asked.iter().map(|t| chain(&a, t)).collect();
    a
}

impl Callback {
    fn new(pid: i32, handle: u64) -> Callback {
        Callback {
            pid,
            handle,
            symbol: None,
            durations: Vec::new(),
            starts: Vec::new(),
            dispatch: Vec::new(),
        }
    }
}

/// Each callback run's dispatch: from the last take on its thread before it (and after the
/// run before it on that thread) to its start.
fn dispatch(a: &mut Analysis) {
    let mut takes: HashMap<(i32, u32), Vec<i64>> = HashMap::new();
    for t in &a.takes {
        takes.entry((a.subscriptions[t.subscription].pid, t.tid)).or_default().push(t.time_ns);
    }
    let mut runs: HashMap<(i32, u32), Vec<i64>> = HashMap::new();
    for c in &a.callbacks {
        for &(tid, start) in &c.starts {
            runs.entry((c.pid, tid)).or_default().push(start);
        }
    }
    for v in takes.values_mut().chain(runs.values_mut()) {
        v.sort_unstable();
    }
    for c in a.callbacks.iter_mut() {
        for &(tid, start) in &c.starts {
            let on = runs.get(&(c.pid, tid)).map(Vec::as_slice).unwrap_or_default();
            let before = on.partition_point(|&s| s < start);
            let after = if before == 0 { i64::MIN } else { on[before - 1] };
            let t = takes.get(&(c.pid, tid)).map(Vec::as_slice).unwrap_or_default();
            let last = t.partition_point(|&x| x <= start);
            if last > 0 && t[last - 1] > after {
                c.dispatch.push(start - t[last - 1]);
            }
        }
    }
}

/// Join each take to its publish: same topic, same source timestamp.
fn join(a: &mut Analysis) {
    let mut by_key: HashMap<(&str, i64), usize> = HashMap::new();
    for (i, p) in a.publishes.iter().enumerate() {
        by_key.insert((a.publishers[p.publisher].topic.as_str(), p.stamp), i);
    }
    let mut unjoined = 0;
    let mut takes_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, t) in a.takes.iter_mut().enumerate() {
        t.publish = by_key.get(&(a.subscriptions[t.subscription].topic.as_str(), t.stamp)).copied();
        match t.publish {
            Some(p) => takes_of.entry(p).or_default().push(i),
            None => unjoined += 1,
        }
    }
    a.unjoined_takes = unjoined;
    a.takes_of = takes_of;
}

/// On one thread: (time, a take (else a publish), its index).
type Step = (i64, bool, usize);

/// A node's publish follows its take when it is the next thing on that thread after it.
fn link(a: &mut Analysis) {
    // (pid, tid) -> time-ordered takes and publishes
    let mut threads: HashMap<(i32, u32), Vec<Step>> = HashMap::new();
    for (i, t) in a.takes.iter().enumerate() {
        let pid = a.subscriptions[t.subscription].pid;
        threads.entry((pid, t.tid)).or_default().push((t.time_ns, true, i));
    }
    for (i, p) in a.publishes.iter().enumerate() {
        let pid = a.publishers[p.publisher].pid;
        threads.entry((pid, p.tid)).or_default().push((p.time_ns, false, i));
    }
    for seq in threads.values_mut() {
        seq.sort_by_key(|&(t, is_take, _)| (t, !is_take));
        let mut last_take: Option<usize> = None;
        for &(_, is_take, i) in seq.iter() {
            if is_take {
                last_take = Some(i);
            } else if let Some(t) = last_take {
                let same_node = a.subscriptions[a.takes[t].subscription].node
                    == a.publishers[a.publishes[i].publisher].node;
                if same_node {
                    a.caused.entry(t).or_default().push(i);
                }
            }
        }
    }
}

fn edges(a: &Analysis) -> Vec<Edge> {
    let mut by_pair: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for (i, t) in a.takes.iter().enumerate() {
        if let Some(p) = t.publish {
            by_pair.entry((a.publishes[p].publisher, t.subscription)).or_default().push(i);
        }
    }
    let mut per_publisher: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, p) in a.publishes.iter().enumerate() {
        per_publisher.entry(p.publisher).or_default().push(i);
    }
    for v in per_publisher.values_mut() {
        v.sort_by_key(|&i| a.publishes[i].time_ns);
    }
    by_pair
        .into_iter()
        .map(|((publisher, subscription), takes)| {
            let mut lat: Vec<(i64, i64, usize)> = takes
                .iter()
                .map(|&t| {
                    let p = a.takes[t].publish.unwrap_or_default();
                    let pt = a.publishes[p].time_ns;
                    (pt, a.takes[t].time_ns - pt, p)
                })
                .collect();
            lat.sort_by_key(|&(pt, _, _)| pt);
            let taken: std::collections::HashSet<usize> = lat.iter().map(|&(_, _, p)| p).collect();
            let all = &per_publisher[&publisher];
            let first = lat.first().map_or(i64::MAX, |l| l.0);
            let last = lat.last().map_or(i64::MIN, |l| l.0);
            let (mut lost, mut before, mut after) = (0, 0, 0);
            for &p in all.iter().filter(|p| !taken.contains(p)) {
                let t = a.publishes[p].time_ns;
                if t < first {
                    before += 1;
                } else if t > last {
                    after += 1;
                } else {
                    lost += 1;
                }
            }
            Edge {
                publisher,
                subscription,
                latencies: lat.iter().map(|&(pt, l, _)| (pt, l)).collect(),
                lost,
                before_first: before,
                after_last: after,
            }
        })
        .collect()
}

/// The chains the graph and the timing imply: topic A -> topic B where a node's publishes
/// on B follow its takes of A (for at least half of them); every path from a topic nothing
/// feeds to one that feeds nothing (16 at most, 16 topics long at most).
fn found_chains(a: &Analysis) -> Vec<Vec<String>> {
    let mut links: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (&t, pubs) in &a.caused {
        let from = &a.subscriptions[a.takes[t].subscription].topic;
        for &p in pubs {
            let to = &a.publishers[a.publishes[p].publisher].topic;
            *links.entry((from.clone(), to.clone())).or_default() += 1;
        }
    }
    let mut published: HashMap<&str, u64> = HashMap::new();
    for p in &a.publishes {
        *published.entry(a.publishers[p.publisher].topic.as_str()).or_default() += 1;
    }
    let next: BTreeMap<String, Vec<String>> = links
        .iter()
        .filter(|((from, to), n)| {
            from != to && **n * 2 >= published.get(to.as_str()).copied().unwrap_or(0)
        })
        .fold(BTreeMap::new(), |mut m, ((from, to), _)| {
            m.entry(from.clone()).or_insert_with(Vec::new).push(to.clone());
            m
        });
    let fed: std::collections::BTreeSet<&String> = next.values().flatten().collect();
    let mut out = Vec::new();
    for start in next.keys().filter(|t| !fed.contains(t)) {
        let mut stack = vec![vec![start.clone()]];
        while let Some(path) = stack.pop() {
            let tail = path.last().expect("a path has a topic");
            match next.get(tail) {
                Some(nx) if path.len() < 16 => {
                    for n in nx.iter().filter(|n| !path.contains(n)) {
                        let mut p = path.clone();
                        p.push(n.clone());
                        stack.push(p);
                    }
                }
                _ if path.len() >= 2 => out.push(path),
                _ => {}
            }
            if out.len() >= 16 {
                return out;
            }
        }
    }
    out.sort();
    out
}

/// One chain's messages: every way a message of the first topic took to the last.
fn chain(a: &Analysis, topics: &[String]) -> Chain {
    let topic_of_take = |t: usize| &a.subscriptions[a.takes[t].subscription].topic;
    let mut hop_names = Vec::new();
    for (i, t) in topics.iter().enumerate() {
        hop_names.push(format!("{t} (middleware)"));
        if let Some(next) = topics.get(i + 1) {
            let node = a
                .publishers
                .iter()
                .find(|p| &p.topic == next)
                .map_or_else(|| "?".to_string(), |p| p.node.clone());
            hop_names.push(format!("{node} (node)"));
        }
    }
    let mut messages = Vec::new();
    let mut incomplete = 0;
    let firsts = a
        .publishes
        .iter()
        .enumerate()
        .filter(|(_, p)| topics.first() == Some(&a.publishers[p.publisher].topic));
    for (p0, _) in firsts {
        // (publish at this level, takes so far)
        let mut frontier: Vec<(usize, Vec<usize>)> = vec![(p0, Vec::new())];
        for (level, topic) in topics.iter().enumerate() {
            let mut next = Vec::new();
            for (p, path) in frontier {
                for &t in a.takes_of.get(&p).into_iter().flatten() {
                    if topic_of_take(t) != topic {
                        continue;
                    }
                    let mut path = path.clone();
                    path.push(t);
                    match topics.get(level + 1) {
                        None => next.push((p, path)),
                        Some(out) => {
                            for &q in a.caused.get(&t).into_iter().flatten() {
                                if &a.publishers[a.publishes[q].publisher].topic == out {
                                    next.push((q, path.clone()));
                                }
                            }
                        }
                    }
                }
            }
            frontier = next;
        }
        if frontier.is_empty() {
            incomplete += 1;
        }
        for (_, path) in frontier {
            messages.push(chain_message(a, p0, &path));
        }
    }
    messages.sort_by_key(|m| m.start_ns);
    Chain { topics: topics.to_vec(), hop_names, messages, incomplete }
}

fn chain_message(a: &Analysis, p0: usize, takes: &[usize]) -> ChainMessage {
    let start = a.publishes[p0].time_ns;
    let mut hops = Vec::new();
    let mut at = start;
    for (i, &t) in takes.iter().enumerate() {
        let take = &a.takes[t];
        hops.push(take.time_ns - at);
        at = take.time_ns;
        if let Some(&next) = takes.get(i + 1) {
            let p = a.takes[next].publish.expect("a chain's take joined its publish");
            hops.push(a.publishes[p].time_ns - at);
            at = a.publishes[p].time_ns;
        }
    }
    ChainMessage { start_ns: start, hops, end_to_end_ns: at - start, takes: takes.to_vec() }
}

#[cfg(test)]
mod tests;
