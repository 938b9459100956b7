//! AF_XDP for the UDP probe: the steering XDP program (emitted here as BPF instructions,
//! loaded with bpf(2), attached through a BPF link), and an XDP socket with its UMEM and
//! four rings (if_xdp.h, Documentation/networking/af_xdp.rst).
//!
//! Contract: the program sends to the socket only IPv4/UDP datagrams (no IP options, not a
//! fragment) for one destination address and port arriving on the socket's queue; every
//! other frame goes on to the kernel (XDP_PASS). It is attached through a BPF link, so the
//! kernel detaches it when the link's last descriptor closes: on drop, on exit, on kill -9.
//! Another XDP program already on the device is never replaced (EBUSY, named). The ring
//! operations used in a hot loop ([`Xsk::rx`], [`Xsk::tx`], [`Xsk::kick`], [`Xsk::reap`],
//! [`Xsk::alloc`]) never allocate. Nothing here prints.

mod bpf;
mod os;
mod xsk;

pub use bpf::*;
pub use xsk::*;

use crate::SysError;
use os::{errno, owned, unsafe_zeroed};
use std::os::fd::AsRawFd;

/// The device that holds an IPv4 address, in the calling thread's network namespace:
/// (name, ifindex, MAC, MTU).
pub fn device_of(ip: std::net::Ipv4Addr) -> Result<(String, u32, [u8; 6], u32), SysError> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills list, freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(SysError::os("getifaddrs", errno()));
    }
    let mut found = None;
    let mut p = list;
    while !p.is_null() {
        // SAFETY: p walks the list getifaddrs returned.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr is a live sockaddr; its family says whether it is a sockaddr_in.
            let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if fam == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                if u32::from_be(sin.sin_addr.s_addr) == u32::from(ip) {
                    // SAFETY: ifa_name is a NUL-terminated name.
                    found = Some(
                        unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(list) };
    let name = found.ok_or_else(|| {
        SysError::os(
            format!("{ip} is not an address of a device here (XDP needs the device that holds it)"),
            libc::EADDRNOTAVAIL,
        )
    })?;
    let cname = std::ffi::CString::new(name.clone()).unwrap_or_default();
    // SAFETY: cname is a NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(SysError::os(format!("if_nametoindex({name})"), errno()));
    }
    // SAFETY: a plain socket for the two ioctls, closed on return.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(SysError::os("socket(AF_INET) for SIOCGIFHWADDR", errno()));
    }
    let s = owned(s);
    let mut req: libc::ifreq = unsafe_zeroed();
    for (i, b) in name.bytes().take(libc::IFNAMSIZ - 1).enumerate() {
        req.ifr_name[i] = b as libc::c_char;
    }
    // SAFETY: req is a live ifreq naming the device.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) } != 0 {
        return Err(SysError::os(format!("SIOCGIFHWADDR {name}"), errno()));
    }
    // SAFETY: SIOCGIFHWADDR filled ifru_hwaddr.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *m = *b as u8;
    }
    // SAFETY: req is a live ifreq naming the device.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } != 0 {
        return Err(SysError::os(format!("SIOCGIFMTU {name}"), errno()));
    }
    // SAFETY: SIOCGIFMTU filled ifru_mtu.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
    Ok((name, ifindex, mac, mtu))
}

/// Set SO_BUSY_POLL and SO_PREFER_BUSY_POLL on the XDP socket (busy polling of the
/// driver from the receiving thread; effective where the driver polls with NAPI).
pub fn set_busy_poll(xsk: &Xsk, us: u32) -> Result<(), SysError> {
    const SO_PREFER_BUSY_POLL: i32 = 69;
    const SO_BUSY_POLL_BUDGET: i32 = 70;
    for (name, v, what) in [
        (libc::SO_BUSY_POLL, us.min(i32::MAX as u32) as i32, "SO_BUSY_POLL"),
        (SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"),
        (SO_BUSY_POLL_BUDGET, 64, "SO_BUSY_POLL_BUDGET"),
    ] {
        // SAFETY: v is a live c_int.
        let rc = unsafe {
            libc::setsockopt(
                xsk.fd(),
                libc::SOL_SOCKET,
                name,
                &v as *const i32 as *const libc::c_void,
                4,
            )
        };
        if rc != 0 {
            return Err(SysError::os(format!("{what} {v} on the XDP socket"), errno()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod root_tests {
    use super::*;
    use std::process::Command;

    fn ip(args: &[&str]) -> String {
        let o = Command::new("ip").args(args).output().expect("ip(8)");
        assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
        }
    }

    /// The verifier takes the program, it attaches to a veth, a socket binds to its queue and
    /// enters the map, and when they are dropped the device has no XDP program left.
    #[test]
    fn root_steering_loads_attaches_and_goes_with_its_link() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            crate::test_skip::skipped(format_args!("needs root (CI runs as root)"));
            return;
        }
        let name = format!("rtxs{}", std::process::id() % 100_000);
        let _ns = Ns(name.clone());
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "add", "xa", "type", "veth", "peer", "name", "xb"]);
        ip(&["-n", &name, "addr", "add", "198.18.7.1/24", "dev", "xa"]);
        for d in ["xa", "xb", "lo"] {
            ip(&["-n", &name, "link", "set", d, "up"]);
        }
        let path = format!("/run/netns/{name}");
        let r = crate::net::socket_in_netns(&path, || -> Result<_, SysError> {
            let (dev, ifindex, mac, mtu) = device_of("198.18.7.1".parse().unwrap())?;
            let steer = Steer { ip: "198.18.7.1".parse().unwrap(), port: 9300 };
            let s = attach_steering(ifindex, steer, false)?;
            let x = Xsk::open(ifindex, 0, s.mode == AttachMode::Generic)?;
            s.insert(0, &x)?;
            Ok((dev, mac, mtu, s.mode, x.mode, s.prog_id, s, x))
        })
        .unwrap();
        let (dev, mac, mtu, mode, copy, id, s, x) = r.unwrap();
        assert_eq!((dev.as_str(), mtu), ("xa", 1500));
        assert_ne!(mac, [0u8; 6]);
        assert_eq!(copy, CopyMode::Copy, "veth has no zero-copy");
        assert!(id > 0);
        let shown = ip(&["-n", &name, "-d", "link", "show", "dev", "xa"]);
        assert!(shown.contains(&format!("id {id}")), "{mode:?}: {shown}");
        drop((s, x));
        // the link's last descriptor is gone: the kernel detached the program
        let shown = ip(&["-n", &name, "-d", "link", "show", "dev", "xa"]);
        assert!(!shown.contains("prog/xdp"), "{shown}");
    }
}
