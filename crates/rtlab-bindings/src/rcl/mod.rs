//! ROS 2's C API (rcl, rcutils, rmw, rosidl's C runtime and `sensor_msgs/msg/CompressedImage`'s
//! C message and type support), resolved at run time from an installation's libraries
//! ([`resolve`]; the declarations in [`ffi`]), behind small safe wrappers: a node
//! ([`Node`]: init options, context and node), a publisher and a subscription of
//! `CompressedImage` with the one C message each reuses ([`Publisher`], [`Subscription`]).
//!
//! Contract: everything made is finalized once, on drop, in reverse (ports before their node:
//! they hold an `Arc`); rcl's creation and destruction of entities on one node are serialized
//! by the node's lock; publishing and taking reuse the port's message (rtlab allocates
//! nothing per message; the type support may resize a taken message's data sequence).
//! Errors are one line, rcl's own (its thread-local error state is read and cleared). Which
//! libraries are loaded, and in which order, is the caller's (rtlab-pubsub's `ros2::load`).
//! Never prints.

pub mod ffi;

use crate::dl::Library;
use crate::Failed;
use ffi::{Api, CompressedImage, Opaque, PortOptions, QosProfile};
use ffi::{RET_OK, RET_TAKE_FAILED, RET_TIMEOUT};
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

/// The libraries the functions are resolved from (loaded by the caller, with their
/// dependencies).
pub struct Libraries<'a> {
    /// `librcl.so` (rcl, and rcutils through it).
    pub rcl: &'a Library,
    /// The RMW implementation's library.
    pub rmw: &'a Library,
    /// `libsensor_msgs__rosidl_typesupport_c.so`.
    pub type_support: &'a Library,
    /// `libsensor_msgs__rosidl_generator_c.so`.
    pub message: &'a Library,
    /// `librosidl_runtime_c.so`.
    pub runtime: &'a Library,
}

/// Resolve the functions rtlab calls: the first symbol missing is named. The libraries are
/// trusted to be ROS 2's (checked against rcl 5.3, 9.2 and 10.1, [`ffi`]): as loading a
/// library runs its code, naming one is trusting it.
pub fn resolve(l: &Libraries) -> Result<Api, String> {
    let (rcl, rt) = (l.rcl, l.runtime);
    // SAFETY: each type is the C declaration of the symbol it is resolved from (ffi.rs says
    // against which headers they were checked).
    unsafe {
        Ok(Api {
            get_default_allocator: rcl.symbol("rcutils_get_default_allocator")?,
            get_error_string: rcl.symbol("rcutils_get_error_string")?,
            reset_error: rcl.symbol("rcutils_reset_error")?,
            init_options_init: rcl.symbol("rcl_init_options_init")?,
            init_options_set_domain_id: rcl.symbol("rcl_init_options_set_domain_id")?,
            init_options_fini: rcl.symbol("rcl_init_options_fini")?,
            init: rcl.symbol("rcl_init")?,
            shutdown: rcl.symbol("rcl_shutdown")?,
            context_fini: rcl.symbol("rcl_context_fini")?,
            node_get_default_options: rcl.symbol("rcl_node_get_default_options")?,
            node_init: rcl.symbol("rcl_node_init")?,
            node_fini: rcl.symbol("rcl_node_fini")?,
            publisher_get_default_options: rcl.symbol("rcl_publisher_get_default_options")?,
            publisher_init: rcl.symbol("rcl_publisher_init")?,
            publisher_fini: rcl.symbol("rcl_publisher_fini")?,
            publish: rcl.symbol("rcl_publish")?,
            publisher_get_subscription_count: rcl
                .symbol("rcl_publisher_get_subscription_count")?,
            publisher_wait_for_all_acked: rcl.symbol("rcl_publisher_wait_for_all_acked")?,
            subscription_get_default_options: rcl
                .symbol("rcl_subscription_get_default_options")?,
            subscription_init: rcl.symbol("rcl_subscription_init")?,
            subscription_fini: rcl.symbol("rcl_subscription_fini")?,
            take: rcl.symbol("rcl_take")?,
            subscription_get_publisher_count: rcl.symbol("rcl_subscription_get_publisher_count")?,
            wait_set_init: rcl.symbol("rcl_wait_set_init")?,
            wait_set_clear: rcl.symbol("rcl_wait_set_clear")?,
            wait_set_add_subscription: rcl.symbol("rcl_wait_set_add_subscription")?,
            wait: rcl.symbol("rcl_wait")?,
            wait_set_fini: rcl.symbol("rcl_wait_set_fini")?,
            rmw_identifier: l.rmw.symbol("rmw_get_implementation_identifier")?,
            type_support: l.type_support.symbol(
                "rosidl_typesupport_c__get_message_type_support_handle__sensor_msgs__msg__CompressedImage",
            )?,
            message_init: l.message.symbol("sensor_msgs__msg__CompressedImage__init")?,
            message_fini: l.message.symbol("sensor_msgs__msg__CompressedImage__fini")?,
            string_assign: rt.symbol("rosidl_runtime_c__String__assign")?,
            u8_sequence_init: rt.symbol("rosidl_runtime_c__uint8__Sequence__init")?,
            u8_sequence_fini: rt.symbol("rosidl_runtime_c__uint8__Sequence__fini")?,
        })
    }
}

/// What the loaded RMW says it is (`rmw_get_implementation_identifier`; "" for none).
pub fn rmw_identifier(api: &Api) -> String {
    // SAFETY: the RMW's identifier is a static NUL-terminated string (or null).
    unsafe {
        let p = (api.rmw_identifier)();
        if p.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

/// rcl's init options, context and node; finalized last (its ports hold an `Arc`).
pub struct Node {
    api: &'static Api,
    init_options: Box<ffi::InitOptions>,
    context: Box<ffi::Context>,
    node: Box<ffi::Node>,
    /// rcl's creation and destruction of entities on one node are not thread-safe.
    lock: Mutex<()>,
    name: String,
}

// SAFETY: the boxes are only touched through rcl calls made under `lock` (creation and
// destruction) or on a port's own handle; rcl_publish/rcl_take on distinct ports are
// thread-safe (rcl's documentation).
unsafe impl Send for Node {}
// SAFETY: as above.
unsafe impl Sync for Node {}

impl Node {
    /// A context in `domain` and a node `name` in namespace `/`.
    pub fn open(api: &'static Api, domain: u32, name: &str) -> Result<Node, Failed> {
        let cname = CString::new(name).map_err(|_| Failed::new("node", "a NUL in the name"))?;
        let mut init_options = ffi::InitOptions::zeroed();
        let mut context = ffi::Context::zeroed();
        let mut node = ffi::Node::zeroed();
        // SAFETY: zeroed handles as rcl's zero-initializers make them; each pointer is a live
        // Box; the allocator is rcutils' default by value; failures leave nothing to finalize
        // but what was initialized, finalized here in reverse.
        unsafe {
            let alloc = (api.get_default_allocator)();
            if (api.init_options_init)(init_options.ptr(), alloc) != RET_OK {
                return Err(Failed::new("init", api.last_error()));
            }
            if (api.init_options_set_domain_id)(init_options.ptr(), domain as usize) != RET_OK {
                let e = api.last_error();
                (api.init_options_fini)(init_options.ptr());
                return Err(Failed::new("domain", e));
            }
            if (api.init)(0, std::ptr::null(), init_options.ptr(), context.ptr()) != RET_OK {
                let e = api.last_error();
                (api.init_options_fini)(init_options.ptr());
                return Err(Failed::new("rcl_init", e));
            }
            let options = (api.node_get_default_options)();
            let ns = c"/";
            if (api.node_init)(node.ptr(), cname.as_ptr(), ns.as_ptr(), context.ptr(), &options)
                != RET_OK
            {
                let e = api.last_error();
                (api.shutdown)(context.ptr());
                (api.context_fini)(context.ptr());
                (api.init_options_fini)(init_options.ptr());
                return Err(Failed::new("node", e));
            }
        }
        Ok(Node { api, init_options, context, node, lock: Mutex::new(()), name: name.into() })
    }

    /// The node's name (namespace `/`).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn node_ptr(&self) -> *mut c_void {
        &*self.node as *const Opaque<2> as *mut c_void
    }

    fn context_ptr(&self) -> *mut c_void {
        &*self.context as *const Opaque<3> as *mut c_void
    }

    /// rcl's default publisher or subscription options, with the QoS `qos` writes.
    fn options(&self, publisher: bool, qos: impl FnOnce(&mut QosProfile)) -> PortOptions {
        let api = self.api;
        // SAFETY: rcl's default options by value (see ffi: larger than any distribution's).
        let mut o = unsafe {
            if publisher {
                (api.publisher_get_default_options)()
            } else {
                (api.subscription_get_default_options)()
            }
        };
        qos(&mut o.qos);
        o
    }

    /// A C message whose data sequence holds `data_capacity` bytes.
    fn message(&self, data_capacity: usize, tag: &str) -> Result<Message, Failed> {
        let api = self.api;
        let tag = CString::new(tag).map_err(|_| Failed::new("message", "a NUL in the tag"))?;
        // SAFETY: zeroed bytes are what the generated __init starts from (it initializes every
        // member); the Box keeps the address stable for rcl's use; strings and sequence are
        // assigned through rosidl's own functions.
        unsafe {
            let mut m: Box<CompressedImage> = Box::new(std::mem::zeroed());
            if !(api.message_init)(&mut *m) {
                return Err(Failed::new(
                    "message",
                    "sensor_msgs__msg__CompressedImage__init failed",
                ));
            }
            let ok = (api.string_assign)(&mut m.header.frame_id, tag.as_ptr())
                && (api.string_assign)(&mut m.format, tag.as_ptr());
            (api.u8_sequence_fini)(&mut m.data);
            if !ok || !(api.u8_sequence_init)(&mut m.data, data_capacity) {
                (api.message_fini)(&mut *m);
                return Err(Failed::new(
                    "message",
                    format!("no memory for a message of {data_capacity} data bytes"),
                ));
            }
            Ok(Message { api, msg: m })
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let a = self.api;
        // SAFETY: made by rcl_node_init / rcl_init / rcl_init_options_init in `open`, finalized
        // once, after every port (ports hold an Arc to this node).
        unsafe {
            (a.node_fini)(self.node.ptr());
            (a.shutdown)(self.context.ptr());
            (a.context_fini)(self.context.ptr());
            (a.init_options_fini)(self.init_options.ptr());
        }
    }
}

/// How a port is made: its topic, its QoS (written into rcl's default profile), the C
/// message's `header.frame_id` and `format`, and its data capacity.
pub struct PortSpec<'a, Q: FnOnce(&mut QosProfile)> {
    pub topic: &'a str,
    pub qos: Q,
    pub tag: &'a str,
    pub data_capacity: usize,
}

fn topic_name(topic: &str) -> Result<CString, Failed> {
    CString::new(topic).map_err(|_| Failed::new("topic", format!("{topic:?} has a NUL byte")))
}

/// A C message, finalized on drop.
struct Message {
    api: &'static Api,
    msg: Box<CompressedImage>,
}

impl Drop for Message {
    fn drop(&mut self) {
        // SAFETY: initialized by `Node::message`, finalized once.
        unsafe { (self.api.message_fini)(&mut *self.msg) };
    }
}

/// An rcl publisher of `CompressedImage` and the message it sends.
pub struct Publisher {
    node: Arc<Node>,
    handle: Box<ffi::Port>,
    msg: Message,
    /// Reliable: on drop, wait at most this long for acknowledgements.
    drain_ns: Option<i64>,
}

// SAFETY: the handle and message are used by the one thread that owns this publisher at a
// time (&mut to publish; matched and wait_acknowledged only read rcl's state, thread-safe);
// rcl_publish is thread-safe across publishers.
unsafe impl Send for Publisher {}

impl Publisher {
    /// A publisher on `node` as `spec` says; a reliable one (`drain_ns`) waits that long at
    /// most for acknowledgements when dropped.
    pub fn create<Q: FnOnce(&mut QosProfile)>(
        node: &Arc<Node>,
        spec: PortSpec<Q>,
        drain_ns: Option<i64>,
    ) -> Result<Publisher, Failed> {
        let name = topic_name(spec.topic)?;
        let options = node.options(true, spec.qos);
        let msg = node.message(spec.data_capacity, spec.tag)?;
        let mut handle = ffi::Port::zeroed();
        let n = node;
        let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: a zeroed publisher, the live node, the type support's static handle, a
        // NUL-terminated topic and options made by rcl; rcl copies what it keeps.
        let rc = unsafe {
            let ts = (n.api.type_support)();
            (n.api.publisher_init)(handle.ptr(), n.node_ptr(), ts, name.as_ptr(), &options)
        };
        if rc != RET_OK {
            let e = n.api.last_error();
            return Err(Failed::new("publisher", format!("{}: {e}", spec.topic)));
        }
        Ok(Publisher { node: n.clone(), handle, msg, drain_ns })
    }

    /// The data bytes a message can carry.
    pub fn capacity(&self) -> usize {
        self.msg.msg.data.capacity
    }

    /// Publish the message with `header.stamp` = `stamp_ns`, `data_len` data bytes (at least
    /// 8, at most [`Self::capacity`]) of which the first 8 are `seq` (little endian).
    #[inline]
    pub fn publish(&mut self, seq: u64, stamp_ns: i64, data_len: usize) -> Result<(), Failed> {
        let m = &mut *self.msg.msg;
        if data_len < 8 || data_len > m.data.capacity {
            return Err(Failed::new("publish", format!("{data_len} data bytes do not fit")));
        }
        m.header.stamp.sec = stamp_ns.div_euclid(1_000_000_000) as i32;
        m.header.stamp.nanosec = stamp_ns.rem_euclid(1_000_000_000) as u32;
        m.data.size = data_len;
        // SAFETY: data holds `capacity` >= data_len >= 8 bytes (made by u8_sequence_init);
        // rcl_publish reads the message during the call only.
        let rc = unsafe {
            std::ptr::copy_nonoverlapping(seq.to_le_bytes().as_ptr(), m.data.data, 8);
            (self.node.api.publish)(
                self.handle.ptr(),
                m as *const CompressedImage as *const c_void,
                std::ptr::null_mut(),
            )
        };
        if rc != RET_OK {
            return Err(Failed::new("publish", self.node.api.last_error()));
        }
        Ok(())
    }

    /// Subscriptions matched now (None: rcl could not tell).
    pub fn matched(&self) -> Option<usize> {
        let mut n = 0usize;
        // SAFETY: a live publisher; n is a valid out-pointer.
        let rc = unsafe {
            (self.node.api.publisher_get_subscription_count)(
                &*self.handle as *const ffi::Port as *const c_void,
                &mut n,
            )
        };
        (rc == RET_OK).then_some(n)
    }

    /// `rcl_publisher_wait_for_all_acked` for at most `timeout_ns`: Some(true) when
    /// acknowledged, Some(false) at the timeout, None when the RMW cannot tell.
    pub fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        let api = self.node.api;
        // SAFETY: a live publisher; rcl_publisher_wait_for_all_acked blocks at most the time.
        let rc = unsafe {
            (api.publisher_wait_for_all_acked)(
                &*self.handle as *const ffi::Port as *const c_void,
                timeout_ns.max(0),
            )
        };
        match rc {
            RET_OK => Some(true),
            RET_TIMEOUT => Some(false),
            // an RMW without acknowledgements (RCL_RET_UNSUPPORTED) or an error: cannot tell
            _ => {
                api.last_error();
                None
            }
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let n = &self.node;
        // SAFETY: a publisher made by publisher_init on this node, finalized once; a reliable
        // one first waits (bounded) for its last messages to be acknowledged.
        unsafe {
            if let Some(drain_ns) = self.drain_ns {
                (n.api.publisher_wait_for_all_acked)(self.handle.ptr(), drain_ns);
                n.api.last_error();
            }
            let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
            (n.api.publisher_fini)(self.handle.ptr(), n.node_ptr());
        }
    }
}

/// What a take found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// A message: the first 8 data bytes as `seq` (little endian), `header.stamp`, and how
    /// many data bytes it carried.
    Message { seq: u64, stamp_ns: i64, data_len: usize },
    /// A message with fewer than 8 data bytes (no sequence number).
    Short,
    /// Nothing to take.
    Nothing,
}

/// An rcl subscription of `CompressedImage`, its wait set and the message it takes into.
pub struct Subscription {
    node: Arc<Node>,
    handle: Box<ffi::Port>,
    wait_set: Box<ffi::WaitSet>,
    msg: Message,
}

// SAFETY: as the publisher: one thread at a time uses the handle, wait set and message
// (&mut self).
unsafe impl Send for Subscription {}

impl Subscription {
    /// A subscription on `node` as `spec` says, with a wait set for it.
    pub fn create<Q: FnOnce(&mut QosProfile)>(
        node: &Arc<Node>,
        spec: PortSpec<Q>,
    ) -> Result<Subscription, Failed> {
        let name = topic_name(spec.topic)?;
        let options = node.options(false, spec.qos);
        let msg = node.message(spec.data_capacity, spec.tag)?;
        let mut handle = ffi::Port::zeroed();
        let mut wait_set = ffi::WaitSet::zeroed();
        let n = node;
        let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: as the publisher; the wait set is zeroed, sized for one subscription, on
        // the node's context, with rcutils' default allocator.
        unsafe {
            let ts = (n.api.type_support)();
            if (n.api.subscription_init)(handle.ptr(), n.node_ptr(), ts, name.as_ptr(), &options)
                != RET_OK
            {
                let e = n.api.last_error();
                return Err(Failed::new("subscription", format!("{}: {e}", spec.topic)));
            }
            let alloc = (n.api.get_default_allocator)();
            if (n.api.wait_set_init)(wait_set.ptr(), 1, 0, 0, 0, 0, 0, n.context_ptr(), alloc)
                != RET_OK
            {
                let e = n.api.last_error();
                (n.api.subscription_fini)(handle.ptr(), n.node_ptr());
                return Err(Failed::new("wait set", e));
            }
        }
        Ok(Subscription { node: n.clone(), handle, wait_set, msg })
    }

    /// Take the next message, never blocking.
    #[inline]
    pub fn take(&mut self) -> Result<Taken, Failed> {
        let api = self.node.api;
        let m = &mut *self.msg.msg;
        // SAFETY: a live subscription and a message of its type; rcl writes the message
        // during the call only; message info and allocation may be null (rcl's contract).
        let rc = unsafe {
            (api.take)(
                self.handle.ptr(),
                m as *mut CompressedImage as *mut c_void,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        match rc {
            RET_OK => {
                if m.data.size < 8 || m.data.data.is_null() {
                    return Ok(Taken::Short);
                }
                let mut seq = [0u8; 8];
                // SAFETY: data holds size >= 8 bytes (checked above).
                unsafe { std::ptr::copy_nonoverlapping(m.data.data, seq.as_mut_ptr(), 8) };
                let s = &m.header.stamp;
                Ok(Taken::Message {
                    seq: u64::from_le_bytes(seq),
                    stamp_ns: s.sec as i64 * 1_000_000_000 + s.nanosec as i64,
                    data_len: m.data.size,
                })
            }
            RET_TAKE_FAILED => Ok(Taken::Nothing),
            _ => Err(Failed::new("take", api.last_error())),
        }
    }

    /// Publishers matched now (None: rcl could not tell).
    pub fn matched(&self) -> Option<usize> {
        let mut n = 0usize;
        // SAFETY: a live subscription; n is a valid out-pointer.
        let rc = unsafe {
            (self.node.api.subscription_get_publisher_count)(
                &*self.handle as *const ffi::Port as *const c_void,
                &mut n,
            )
        };
        (rc == RET_OK).then_some(n)
    }

    /// Wait at most `timeout_ns` in the wait set (`rcl_wait`): true when the subscription
    /// became ready, false at the timeout.
    pub fn wait(&mut self, timeout_ns: i64) -> Result<bool, Failed> {
        let api = self.node.api;
        let ws = self.wait_set.ptr();
        // SAFETY: the wait set was made for one subscription on this node's context; the
        // subscription outlives the call.
        let rc = unsafe {
            (api.wait_set_clear)(ws);
            (api.wait_set_add_subscription)(ws, self.handle.ptr(), std::ptr::null_mut());
            (api.wait)(ws, timeout_ns.max(0))
        };
        match rc {
            RET_OK => Ok(true),
            RET_TIMEOUT => Ok(false),
            _ => Err(Failed::new("wait", api.last_error())),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let n = &self.node;
        let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: made in `create`, finalized once, the wait set before its subscription.
        unsafe {
            (n.api.wait_set_fini)(self.wait_set.ptr());
            (n.api.subscription_fini)(self.handle.ptr(), n.node_ptr());
        }
    }
}
