use super::*;

fn net(interface: Option<&str>, peers: &[&str]) -> DdsNetwork {
    DdsNetwork {
        interface: interface.map(Into::into),
        peers: peers.iter().map(|p| p.to_string()).collect(),
    }
}

#[test]
fn the_shm_segment_note_comes_only_when_fast_dds_is_on_both_sides_and_a_message_exceeds_it() {
    let d = Shm::Default;
    assert!(shm_segment_note(64 << 10, true, d).is_none());
    assert!(shm_segment_note(1 << 20, false, d).is_none(), "another DDS on the far side: UDP");
    let n = shm_segment_note(1 << 20, true, d).expect("1 MiB exceeds 512 KiB");
    assert!(n.starts_with("fastdds: messages of ") && n.contains("524288"), "{n}");
    assert!(shm_segment_note(SHM_SEGMENT, true, d).is_some(), "the header makes it larger");
    assert!(shm_segment_note(1 << 20, true, Shm::Off).is_none(), "no shared memory");
    assert!(shm_segment_note(1 << 20, true, Shm::Segment(4 << 20)).is_none());
    let n = shm_segment_note(4 << 20, true, Shm::Segment(4 << 20)).unwrap();
    assert!(n.contains("4194304 bytes, --fastdds-shm"), "{n}");
}

#[test]
fn shm_settings_parse_or_say_why_not() {
    assert_eq!(Shm::parse("off"), Ok(Shm::Off));
    assert_eq!(Shm::parse("default"), Ok(Shm::Default));
    assert_eq!(Shm::parse("4MiB"), Ok(Shm::Segment(4 << 20)));
    assert_eq!(Shm::Segment(4 << 20).label().as_deref(), Some("4194304"));
    assert_eq!(Shm::Default.label(), None);
    let e = Shm::parse("1kib").unwrap_err();
    assert!(e.contains("between 65536"), "{e}");
    let e = Shm::parse("lots").unwrap_err();
    assert!(e.starts_with("'lots': off, default or a segment size"), "{e}");
}

#[test]
fn loopback_plan_and_interfaces_by_name_or_address() {
    let lo = std::net::Ipv4Addr::LOCALHOST;
    assert_eq!(
        plan(&DdsNetwork::default()).unwrap(),
        NetPlan { whitelist: vec![lo], peers: vec![(lo, 0)] }
    );
    let p = plan(&net(Some("lo"), &["127.0.0.1", "127.0.0.2:7410", "localhost"])).unwrap();
    assert_eq!(p.whitelist, vec![lo]);
    assert_eq!(p.peers, vec![(lo, 0), (std::net::Ipv4Addr::new(127, 0, 0, 2), 7410), (lo, 0)]);
    let p = plan(&net(Some("127.0.0.1"), &[])).unwrap();
    assert_eq!(p, NetPlan { whitelist: vec![lo], peers: vec![] });
}

#[test]
fn bad_interface_or_peer_is_one_clear_line() {
    for (n, want) in [
        (net(Some("nosuchif0"), &[]), "nosuchif0"),
        (net(Some("192.0.2.254"), &[]), "192.0.2.254"),
        (net(None, &["10.0.0.1"]), "10.0.0.1"),
        (net(Some("lo"), &["a\"b"]), "peers"),
        (net(Some("::1"), &[]), "IPv6"),
    ] {
        let e = FastDdsTransport::with_network(100, &n).err().expect("refused").to_string();
        assert!(e.starts_with("fastdds: ") && e.contains(want) && !e.contains('\n'), "{e}");
    }
    let e = FastDdsTransport::new(MAX_DOMAIN + 1).err().expect("refused").to_string();
    assert!(e.contains("domain id 232"), "{e}");
}
