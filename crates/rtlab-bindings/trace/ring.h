/* The trace ring: what rtlab's interposer (interpose.c) writes and `rtlab trace` reads
 * (crates/rtlab-bindings/src/trace.rs). One file per traced process image,
 * $RTLAB_TRACE_DIR/<pid>-<CLOCK_MONOTONIC ns>.ring, mapped shared by both (a child that
 * forked, then exec'd, has two).
 *
 * Layout: a header of one page, then `slots` slots of 64 bytes. Writers (any thread of the
 * traced process) reserve slots by moving `head` forward with a compare-and-swap, fill
 * them, and commit each by storing its position + 1 in its `seq` (release). The reader
 * copies committed slots from `tail` on and moves `tail` forward (release). A writer that
 * would pass the reader counts the record in `dropped` and returns: the application never
 * waits, allocates, locks or enters the kernel on a record.
 *
 * A record is one slot, or one slot followed by `span - 1` continuation slots holding its
 * names (NUL-terminated, 56 bytes after each continuation slot's `seq`). */
#ifndef RTLAB_TRACE_RING_H
#define RTLAB_TRACE_RING_H

#include <stdint.h>

#define RTLAB_RING_MAGIC "RTLTRACE"
#define RTLAB_RING_VERSION 1u
#define RTLAB_RING_HEADER 4096u
#define RTLAB_RING_SLOT 64u
#define RTLAB_RING_MAX_SPAN 8u
#define RTLAB_RING_MIN_SLOTS 1024u
#define RTLAB_RING_MAX_SLOTS (1u << 24)
#define RTLAB_RING_DEFAULT_SLOTS 65536u

struct rtlab_ring_header {
    char magic[8];          /* written last: a reader ignores a ring without it */
    uint32_t version;
    uint32_t slot_size;
    uint64_t slots;         /* a power of two */
    int32_t pid;
    int32_t ppid;
    int64_t start_monotonic_ns;
    int64_t start_realtime_ns;
    char comm[16];
    uint64_t head;          /* offset 64: the writers' line */
    uint64_t dropped;       /* offset 72: records a full ring refused */
    uint8_t pad0[48];
    uint64_t tail;          /* offset 128: the reader's line */
};

struct rtlab_ring_slot {
    uint64_t seq;           /* position + 1 once committed */
    uint16_t kind;          /* enum rtlab_event */
    uint16_t span;          /* slots of this record, 1..=RTLAB_RING_MAX_SPAN */
    uint16_t cpu;
    uint16_t flags;         /* bit 0: taken (rmw_take), intra-process (callback_start) */
    uint32_t tid;
    uint32_t pad;
    int64_t time_ns;        /* CLOCK_MONOTONIC */
    uint64_t a, b, c, d;
};

/* The events, by the tracepoint (tracetools.h) each records; a..d its arguments. */
enum rtlab_event {
    RTLAB_EV_RCL_INIT = 1,                /* a context */
    RTLAB_EV_RCL_NODE_INIT = 2,           /* a node, b rmw node; names: name, namespace */
    RTLAB_EV_RMW_PUBLISHER_INIT = 3,      /* a rmw publisher, b c gid */
    RTLAB_EV_RCL_PUBLISHER_INIT = 4,      /* a publisher, b node, c rmw publisher, d depth; topic */
    RTLAB_EV_RMW_SUBSCRIPTION_INIT = 5,   /* a rmw subscription, b c gid */
    RTLAB_EV_RCL_SUBSCRIPTION_INIT = 6,   /* a subscription, b node, c rmw subscription, d depth; topic */
    RTLAB_EV_RCL_PUBLISH = 7,             /* a publisher, b message */
    RTLAB_EV_RMW_PUBLISH = 8,             /* a rmw publisher, b message, c source timestamp */
    RTLAB_EV_RMW_TAKE = 9,                /* a rmw subscription, b message, c source timestamp */
    RTLAB_EV_RCL_TAKE = 10,               /* b message */
    RTLAB_EV_RCL_TIMER_INIT = 11,         /* a timer, c period ns */
    RTLAB_EV_CALLBACK_START = 12,         /* a callback; flags: intra-process */
    RTLAB_EV_CALLBACK_END = 13,           /* a callback */
    RTLAB_EV_RCLCPP_SUBSCRIPTION_INIT = 14,       /* a subscription, b rclcpp subscription */
    RTLAB_EV_RCLCPP_SUBSCRIPTION_CALLBACK = 15,   /* a rclcpp subscription, b callback */
    RTLAB_EV_RCLCPP_TIMER_CALLBACK = 16,  /* a timer, b callback */
    RTLAB_EV_RCLCPP_TIMER_LINK_NODE = 17, /* a timer, b node */
    RTLAB_EV_RCLCPP_PUBLISH = 18,         /* a publisher, b message */
    RTLAB_EV_RCLCPP_TAKE = 19,            /* b message */
    RTLAB_EV_RCLCPP_CALLBACK_REGISTER = 20, /* a callback; names: symbol */
};

#endif
