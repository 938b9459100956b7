//! The scenarios shipped inside rtlab (presets), one per reference study, and the default job.

/// The scenarios shipped inside rtlab: (name, TOML text).
pub const PRESETS: &[(&str, &str)] = &[
    ("quick", include_str!("../../presets/quick.toml")),
    ("s1-udp-linux", include_str!("../../presets/s1-udp-linux.toml")),
    ("s2-ros2-rt", include_str!("../../presets/s2-ros2-rt.toml")),
    ("s3-ros2-rtt", include_str!("../../presets/s3-ros2-rtt.toml")),
    ("s4-timer", include_str!("../../presets/s4-timer.toml")),
];

/// A preset by name.
pub fn preset(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

#[cfg(test)]
mod preset_tests {
    use super::*;
    use crate::scenario::*;

    #[test]
    fn run_far_overrides_the_file_and_is_kept_for_a_resume() {
        let far = crate::far::FarSpec::parse("ssh:robot2").unwrap();
        let s = Scenario::parse_with_far("s1", preset("s1-udp-linux").unwrap(), 0.01, Some(&far))
            .unwrap();
        let udp = s.cases().iter().find(|c| c.config.kind() == "udp").unwrap();
        assert_eq!(udp.config.far(), Some(&far));
        assert!(!udp.config.needs_pair(), "a far computer needs no namespaces here");
        assert!(s.text.starts_with("far = \"ssh:robot2\""), "{}", &s.text[..80]);
        assert!(s.text.contains("# far = \"pair\"  (overridden by rtlab run --far)"));
        // the kept text reads back as the same scenario (a resumed run)
        let again = Scenario::parse("run 1", &s.text, 0.01).unwrap();
        assert_eq!(again.cases().len(), s.cases().len());
        let udp = again.cases().iter().find(|c| c.config.kind() == "udp").unwrap();
        assert_eq!(udp.config.far(), Some(&far));
        // the preset itself: the far side in the case's pair
        let p = Scenario::parse("s3", preset("s3-ros2-rtt").unwrap(), 1.0).unwrap();
        assert!(p.cases().iter().all(|c| c.config.far() == Some(&crate::far::FarSpec::Pair)));
        assert!(p.cases().iter().all(|c| c.config.needs_pair()));
    }

    #[test]
    fn every_preset_parses_and_has_cases() {
        for (name, text) in PRESETS {
            let s = Scenario::parse(&format!("preset {name}"), text, 1.0)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&s.name, name);
            assert!(!s.cases().is_empty());
        }
    }

    #[test]
    fn presets_carry_the_studies_figures() {
        let s1 = Scenario::parse("s1", preset("s1-udp-linux").unwrap(), 0.01).unwrap();
        let udp: Vec<_> = s1.cases().iter().filter(|c| c.probe == "udp").collect();
        assert_eq!(udp.len(), 32, "4 profiles x 4 loads x 2 paths");
        assert!(udp.iter().all(|c| c.published.as_ref().is_some_and(|p| p.of == Some(600000))));
        assert_eq!(udp[0].config.plan().count, Some(6000), "--scale 0.01 of 600,000 packets");
        let worst = udp.iter().find(|c| c.profile == "no-rt" && c.load == "stress").unwrap();
        assert_eq!(worst.published.as_ref().unwrap().max_us, Some(46742.0));
        // the same round trip through ROS 1, every configuration and load, no published row
        let ros1: Vec<_> = s1.cases().iter().filter(|c| c.probe == "pubsub").collect();
        assert_eq!(ros1.len(), 16, "4 profiles x 4 loads");
        assert!(ros1.iter().all(|c| c.published.is_none()
            && c.params.get("transport").map(String::as_str) == Some("ros1")
            && c.config.far() == Some(&crate::far::FarSpec::Pair)));
        assert_eq!(ros1[0].config.plan().count, Some(6000));

        let s4 = Scenario::parse("s4", preset("s4-timer").unwrap(), 1.0).unwrap();
        assert_eq!(
            s4.cases().len(),
            28,
            "2 intervals x 2 loads x ((normal + rr + fifo) x (roscpp, model) + fifo after init)"
        );
        assert!(
            s4.cases().iter().all(|c| c.published.is_some()),
            "every S4 case has its published row"
        );
        let modes = |m: &str| {
            s4.cases()
                .iter()
                .filter(|c| c.params.get("mode").map(String::as_str) == Some(m))
                .count()
        };
        assert_eq!((modes("roscpp-oneshot"), modes("oneshot-model")), (16, 12));
        let s3 = Scenario::parse("s3", preset("s3-ros2-rtt").unwrap(), 1.0).unwrap();
        assert!(s3.cases().iter().filter(|c| c.published.is_some()).count() >= 11);
        // the three DDS implementations, each case beside the study's DDS1 (DDS2, DDS3 in the label)
        for t in ["cyclonedds", "fastdds", "rustdds"] {
            let idle = s3
                .cases()
                .iter()
                .find(|c| {
                    c.params.get("transport").map(String::as_str) == Some(t)
                        && c.load == "idle"
                        && c.profile == "no-rt"
                })
                .unwrap_or_else(|| panic!("s3 has no idle no-rt case on {t}"));
            let p = idle.published.as_ref().expect("its published row");
            assert_eq!(p.min_us, Some(827.0));
            assert!(p.label.contains("DDS2 1059/1237/4216") && p.source.contains("does not name"));
        }
        let q = Scenario::parse("quick", preset("quick").unwrap(), 1.0).unwrap();
        let secs = q.planned_ns() / 1_000_000_000;
        assert!((60..=240).contains(&secs), "quick measures {secs} s");
    }
}
