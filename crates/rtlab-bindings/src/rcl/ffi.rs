//! The part of ROS 2's C API rtlab-pubsub's `ros2` transport calls (rcl, rcutils, rmw, rosidl's C
//! runtime, and `sensor_msgs/msg/CompressedImage`'s C message and type support), declared by
//! hand and resolved at run time from the installation's libraries ([`super::resolve`]).
//!
//! The declarations were checked against the headers of rcl 5.3 (Humble), 9.2 (Jazzy) and
//! 10.1 (Kilted): the function signatures are the same in all three, and so are the layouts
//! rtlab relies on. Handles whose fields rtlab never reads are opaque byte blocks at least as
//! large as the C struct in any of them, zeroed as rcl's `rcl_get_zero_initialized_*()` are.
//! Structures returned by value are declared at least as large as the C one: each is larger
//! than 16 bytes in every distribution, so the C ABI returns it through a pointer to the
//! caller's memory (x86-64 and aarch64 alike), and a larger buffer is safe. Where rtlab
//! writes fields (the QoS profile, the message) the layout is declared exactly. A test
//! compiles a C file against the installed headers and compares sizes, offsets and enum
//! values with these (crates/rtlab-pubsub/tests/ros2.rs).

use std::ffi::{c_char, c_int, c_void};

pub type Ret = i32;
/// `RCL_RET_OK`.
pub const RET_OK: Ret = 0;
/// `RCL_RET_TIMEOUT` (rcl_wait: nothing became ready).
pub const RET_TIMEOUT: Ret = 2;
/// `RCL_RET_SUBSCRIPTION_TAKE_FAILED` (rcl_take: nothing to take).
pub const RET_TAKE_FAILED: Ret = 401;

/// `rcutils_allocator_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Allocator {
    pub allocate: *mut c_void,
    pub deallocate: *mut c_void,
    pub reallocate: *mut c_void,
    pub zero_allocate: *mut c_void,
    pub state: *mut c_void,
}

/// An opaque rcl handle of at most `N` machine words, zero-initialized (rcl's
/// `rcl_get_zero_initialized_*()` values are all zero bytes).
#[repr(C, align(8))]
pub struct Opaque<const N: usize>(pub [u64; N]);

impl<const N: usize> Opaque<N> {
    pub fn zeroed() -> Box<Self> {
        Box::new(Opaque([0; N]))
    }
    pub fn ptr(&mut self) -> *mut c_void {
        self as *mut Self as *mut c_void
    }
}

/// `rcl_init_options_t` (one pointer).
pub type InitOptions = Opaque<1>;
/// `rcl_context_t` (24 bytes: arguments, impl, instance id).
pub type Context = Opaque<3>;
/// `rcl_node_t` (16 bytes: context, impl).
pub type Node = Opaque<2>;
/// `rcl_publisher_t`, `rcl_subscription_t` (one pointer).
pub type Port = Opaque<1>;
/// `rcl_wait_set_t` (104 bytes: six arrays with their sizes, impl).
pub type WaitSet = Opaque<13>;
/// `rcl_node_options_t` (returned by value; 88-140 bytes by distribution).
pub type NodeOptions = Opaque<64>;

/// `rmw_time_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmwTime {
    pub sec: u64,
    pub nsec: u64,
}

/// `rmw_qos_profile_t`, exactly.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QosProfile {
    pub history: c_int,
    pub depth: usize,
    pub reliability: c_int,
    pub durability: c_int,
    pub deadline: RmwTime,
    pub lifespan: RmwTime,
    pub liveliness: c_int,
    pub liveliness_lease_duration: RmwTime,
    pub avoid_ros_namespace_conventions: bool,
}

/// `RMW_QOS_POLICY_HISTORY_KEEP_LAST` / `_KEEP_ALL`.
pub const HISTORY_KEEP_LAST: c_int = 1;
pub const HISTORY_KEEP_ALL: c_int = 2;
/// `RMW_QOS_POLICY_RELIABILITY_RELIABLE` / `_BEST_EFFORT`.
pub const RELIABILITY_RELIABLE: c_int = 1;
pub const RELIABILITY_BEST_EFFORT: c_int = 2;
/// `RMW_QOS_POLICY_DURABILITY_TRANSIENT_LOCAL` / `_VOLATILE`.
pub const DURABILITY_TRANSIENT_LOCAL: c_int = 1;
pub const DURABILITY_VOLATILE: c_int = 2;

/// `rcl_publisher_options_t` / `rcl_subscription_options_t`: the QoS first (both, in every
/// distribution), then what rtlab never touches (allocator, rmw options, loan flag), returned
/// by value and handed back to `rcl_*_init` unchanged.
#[repr(C)]
pub struct PortOptions {
    pub qos: QosProfile,
    pub rest: [u64; 48],
}

/// `rcutils_error_string_t` (returned by value).
#[repr(C)]
pub struct ErrorString {
    pub str: [c_char; 1024],
}

/// `rosidl_runtime_c__String`.
#[repr(C)]
pub struct RosString {
    pub data: *mut c_char,
    pub size: usize,
    pub capacity: usize,
}

/// `rosidl_runtime_c__uint8__Sequence`.
#[repr(C)]
pub struct U8Sequence {
    pub data: *mut u8,
    pub size: usize,
    pub capacity: usize,
}

/// `builtin_interfaces__msg__Time`.
#[repr(C)]
pub struct Time {
    pub sec: i32,
    pub nanosec: u32,
}

/// `std_msgs__msg__Header`.
#[repr(C)]
pub struct Header {
    pub stamp: Time,
    pub frame_id: RosString,
}

/// `sensor_msgs__msg__CompressedImage`.
#[repr(C)]
pub struct CompressedImage {
    pub header: Header,
    pub format: RosString,
    pub data: U8Sequence,
}

/// The functions, resolved once per process ([`super::resolve`], the only way to make one:
/// the fields are this crate's, so safe code elsewhere cannot hand the wrappers other
/// functions).
pub struct Api {
    pub(crate) get_default_allocator: unsafe extern "C" fn() -> Allocator,
    pub(crate) get_error_string: unsafe extern "C" fn() -> ErrorString,
    pub(crate) reset_error: unsafe extern "C" fn(),
    pub(crate) init_options_init: unsafe extern "C" fn(*mut c_void, Allocator) -> Ret,
    pub(crate) init_options_set_domain_id: unsafe extern "C" fn(*mut c_void, usize) -> Ret,
    pub(crate) init_options_fini: unsafe extern "C" fn(*mut c_void) -> Ret,
    pub(crate) init:
        unsafe extern "C" fn(c_int, *const *const c_char, *const c_void, *mut c_void) -> Ret,
    pub(crate) shutdown: unsafe extern "C" fn(*mut c_void) -> Ret,
    pub(crate) context_fini: unsafe extern "C" fn(*mut c_void) -> Ret,
    pub(crate) node_get_default_options: unsafe extern "C" fn() -> NodeOptions,
    pub(crate) node_init: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        *const c_char,
        *mut c_void,
        *const NodeOptions,
    ) -> Ret,
    pub(crate) node_fini: unsafe extern "C" fn(*mut c_void) -> Ret,
    pub(crate) publisher_get_default_options: unsafe extern "C" fn() -> PortOptions,
    pub(crate) publisher_init: unsafe extern "C" fn(
        *mut c_void,
        *const c_void,
        *const c_void,
        *const c_char,
        *const PortOptions,
    ) -> Ret,
    pub(crate) publisher_fini: unsafe extern "C" fn(*mut c_void, *mut c_void) -> Ret,
    pub(crate) publish: unsafe extern "C" fn(*const c_void, *const c_void, *mut c_void) -> Ret,
    pub(crate) publisher_get_subscription_count:
        unsafe extern "C" fn(*const c_void, *mut usize) -> Ret,
    /// `rcl_publisher_wait_for_all_acked` (Galactic and later).
    pub(crate) publisher_wait_for_all_acked: unsafe extern "C" fn(*const c_void, i64) -> Ret,
    pub(crate) subscription_get_default_options: unsafe extern "C" fn() -> PortOptions,
    pub(crate) subscription_init: unsafe extern "C" fn(
        *mut c_void,
        *const c_void,
        *const c_void,
        *const c_char,
        *const PortOptions,
    ) -> Ret,
    pub(crate) subscription_fini: unsafe extern "C" fn(*mut c_void, *mut c_void) -> Ret,
    pub(crate) take:
        unsafe extern "C" fn(*const c_void, *mut c_void, *mut c_void, *mut c_void) -> Ret,
    pub(crate) subscription_get_publisher_count:
        unsafe extern "C" fn(*const c_void, *mut usize) -> Ret,
    pub(crate) wait_set_init: unsafe extern "C" fn(
        *mut c_void,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        *mut c_void,
        Allocator,
    ) -> Ret,
    pub(crate) wait_set_clear: unsafe extern "C" fn(*mut c_void) -> Ret,
    pub(crate) wait_set_add_subscription:
        unsafe extern "C" fn(*mut c_void, *const c_void, *mut usize) -> Ret,
    pub(crate) wait: unsafe extern "C" fn(*mut c_void, i64) -> Ret,
    pub(crate) wait_set_fini: unsafe extern "C" fn(*mut c_void) -> Ret,
    /// `rmw_get_implementation_identifier`.
    pub(crate) rmw_identifier: unsafe extern "C" fn() -> *const c_char,
    /// `rosidl_typesupport_c__get_message_type_support_handle__sensor_msgs__msg__CompressedImage`.
    pub(crate) type_support: unsafe extern "C" fn() -> *const c_void,
    pub(crate) message_init: unsafe extern "C" fn(*mut CompressedImage) -> bool,
    pub(crate) message_fini: unsafe extern "C" fn(*mut CompressedImage),
    pub(crate) string_assign: unsafe extern "C" fn(*mut RosString, *const c_char) -> bool,
    pub(crate) u8_sequence_init: unsafe extern "C" fn(*mut U8Sequence, usize) -> bool,
    pub(crate) u8_sequence_fini: unsafe extern "C" fn(*mut U8Sequence),
}

impl Api {
    /// rcl's last error, cleared (rcutils keeps one per thread).
    pub fn last_error(&self) -> String {
        // SAFETY: rcutils_get_error_string returns a NUL-terminated copy by value (an empty
        // string when none is set); reset_error only clears this thread's error state.
        unsafe {
            let e = (self.get_error_string)();
            (self.reset_error)();
            let bytes: Vec<u8> = e.str.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
            String::from_utf8_lossy(&bytes).trim().to_string()
        }
    }
}
