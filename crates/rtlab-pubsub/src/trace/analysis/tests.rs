use super::*;

fn ev(kind: Kind, tid: u32, t: i64, args: [u64; 4], names: &[&str]) -> Event {
    Event {
        kind,
        cpu: Some(0),
        flags: u16::from(kind == Kind::RmwTake),
        tid,
        time_ns: t,
        args,
        names: names.iter().map(|s| s.to_string()).collect(),
    }
}

/// A node `name` in process `pid`: its init events, publishing `out` and taking `input`.
fn node(name: &str, input: Option<&str>, out: Option<&str>) -> Vec<Event> {
    let mut v = vec![ev(Kind::RclInit, 1, 0, [9, 0, 0, 0], &[])];
    v.push(ev(Kind::NodeInit, 1, 1, [100, 0, 0, 0], &[name, "/"]));
    if let Some(o) = out {
        v.push(ev(Kind::PublisherInit, 1, 2, [200, 100, 201, 10], &[o]));
    }
    if let Some(i) = input {
        v.push(ev(Kind::SubscriptionInit, 1, 3, [300, 100, 301, 10], &[i]));
    }
    // rcl's own: left out
    v.push(ev(Kind::PublisherInit, 1, 4, [400, 100, 401, 10], &["/rosout"]));
    v
}

fn publish(v: &mut Vec<Event>, t: i64, stamp: u64) {
    v.push(ev(Kind::RclPublish, 1, t, [200, 7, 0, 0], &[]));
    v.push(ev(Kind::RmwPublish, 1, t + 5, [201, 7, stamp, 0], &[]));
}

fn take(v: &mut Vec<Event>, t: i64, stamp: u64) {
    v.push(ev(Kind::RmwTake, 1, t, [301, 8, stamp, 0], &[]));
}

/// source -/scan-> relay -/filtered-> sink: messages at 1000, 2000, 3000, 4000; the relay
/// misses the third.
fn pipeline() -> Vec<ProcessEvents> {
    let mut src = node("source", None, Some("/scan"));
    let mut relay = node("relay", Some("/scan"), Some("/filtered"));
    let mut sink = node("sink", Some("/filtered"), None);
    for k in 1..=4u64 {
        let t = 1000 * k as i64;
        publish(&mut src, t, 50 + k);
        if k != 3 {
            take(&mut relay, t + 100, 50 + k);
            publish(&mut relay, t + 130, 90 + k);
            take(&mut sink, t + 330, 90 + k);
        }
    }
    vec![
        ProcessEvents { pid: 10, events: src },
        ProcessEvents { pid: 11, events: relay },
        ProcessEvents { pid: 12, events: sink },
    ]
}

#[test]
fn every_take_joins_its_publish_across_processes() {
    let a = analyse(&pipeline(), &[]);
    assert_eq!(a.nodes.len(), 3);
    assert_eq!(a.nodes[0], (10, "/source".to_string()));
    assert_eq!(a.publishers.len(), 2, "rcl's /rosout is left out");
    assert_eq!(a.publishes.len(), 4 + 3);
    assert_eq!(a.takes.len(), 3 + 3);
    assert_eq!(a.unjoined_takes, 0);
    assert_eq!(a.edges.len(), 2);
    let scan = &a.edges[0];
    assert_eq!(a.publishers[scan.publisher].topic, "/scan");
    assert_eq!(a.subscriptions[scan.subscription].node, "/relay");
    // from rcl_publish (t), not rmw_publish (t + 5)
    assert_eq!(scan.latencies, [(1000, 100), (2000, 100), (4000, 100)]);
    assert_eq!((scan.lost, scan.before_first, scan.after_last), (1, 0, 0));
    let filtered = &a.edges[1];
    assert_eq!(filtered.latencies.iter().map(|l| l.1).collect::<Vec<_>>(), [200, 200, 200]);
    assert_eq!(filtered.lost, 0);
}

#[test]
fn the_chain_is_found_and_its_hops_add_up() {
    let a = analyse(&pipeline(), &[]);
    assert_eq!(a.chains.len(), 1);
    let c = &a.chains[0];
    assert_eq!(c.topics, ["/scan", "/filtered"]);
    assert_eq!(c.hop_names, ["/scan (middleware)", "/relay (node)", "/filtered (middleware)"]);
    assert_eq!(c.messages.len(), 3);
    assert_eq!(c.incomplete, 1);
    for m in &c.messages {
        assert_eq!(m.hops, [100, 30, 200]);
        assert_eq!(m.hops.iter().sum::<i64>(), m.end_to_end_ns);
        assert_eq!(m.end_to_end_ns, 330);
    }
}

#[test]
fn a_chain_asked_for_is_followed_and_a_broken_one_is_said_incomplete() {
    let asked = vec![vec!["/scan".to_string(), "/filtered".to_string()]];
    let a = analyse(&pipeline(), &asked);
    assert_eq!(a.chains[0].messages.len(), 3);
    let none = vec![vec!["/filtered".to_string(), "/scan".to_string()]];
    let a = analyse(&pipeline(), &none);
    assert_eq!(a.chains[0].messages.len(), 0);
    assert_eq!(a.chains[0].incomplete, 3);
}

#[test]
fn before_the_first_and_after_the_last_are_not_lost() {
    let mut p = pipeline();
    // the source publishes before anyone takes and after the last take
    publish(&mut p[0].events, 500, 1);
    publish(&mut p[0].events, 9000, 2);
    let a = analyse(&p, &[]);
    let scan = &a.edges[0];
    assert_eq!((scan.lost, scan.before_first, scan.after_last), (1, 1, 1));
}

#[test]
fn a_take_from_an_untraced_publisher_is_counted_not_joined() {
    let mut p = pipeline();
    take(&mut p[1].events, 7000, 12345);
    let a = analyse(&p, &[]);
    assert_eq!(a.unjoined_takes, 1);
}

#[test]
fn callbacks_are_timed_and_named_where_the_client_library_says() {
    let mut p = pipeline();
    p[1].events.push(ev(Kind::RclcppCallbackRegister, 1, 5, [77, 0, 0, 0], &["relay_cb"]));
    p[1].events.push(ev(Kind::CallbackStart, 1, 1105, [77, 0, 0, 0], &[]));
    p[1].events.push(ev(Kind::CallbackEnd, 1, 1145, [77, 0, 0, 0], &[]));
    let a = analyse(&p, &[]);
    assert_eq!(a.callbacks.len(), 1);
    assert_eq!(a.callbacks[0].symbol.as_deref(), Some("relay_cb"));
    assert_eq!(a.callbacks[0].durations, [40]);
    // the relay's take of the first message at 1100, its callback at 1105
    assert_eq!(a.callbacks[0].dispatch, [5]);
}

#[test]
fn each_node_says_what_it_took_published_and_held() {
    let a = analyse(&pipeline(), &[]);
    let n = nodes(&a);
    assert_eq!(n.len(), 3);
    assert_eq!((n[0].name.as_str(), n[0].taken, n[0].published), ("/source", 0, 4));
    let relay = &n[1];
    assert_eq!(relay.inputs, ["/scan"]);
    assert_eq!(relay.outputs, ["/filtered"]);
    assert_eq!((relay.taken, relay.published), (3, 3));
    assert_eq!(relay.inside, [30, 30, 30]);
    assert_eq!((n[2].taken, n[2].published, n[2].inside.len()), (3, 0, 0));
}
