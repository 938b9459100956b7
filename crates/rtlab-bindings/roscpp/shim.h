/* rtlab's C API over roscpp (Debian's ROS 1, libroscpp 1.15): one node in this process
 * with one timer on a callback queue of its own, spun on the calling thread. Built by
 * rtlab-bindings' build.rs against Debian's libroscpp-dev; the rtlab binary embeds it and
 * loads it at run time (src/roscpp.rs), in a process of its own per measured timer.
 *
 * Every function returns 0 on success, else -1 with one line in `err` (at most `errlen`
 * bytes, NUL-terminated). Nothing here prints: roscpp's console is set to fatal only. */
#ifndef RTLAB_ROSCPP_SHIM_H
#define RTLAB_ROSCPP_SHIM_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which timer: ros::Timer (ROS time: CLOCK_REALTIME unless /use_sim_time), ros::WallTimer
 * (CLOCK_REALTIME), ros::SteadyTimer (CLOCK_MONOTONIC), or S4's one-shot test on a
 * ros::Timer (re-armed each loop, spinOnce busy-spun on the calling thread). */
enum rros1_kind { RROS1_TIMER = 0, RROS1_WALL = 1, RROS1_STEADY = 2, RROS1_ONESHOT = 3 };

/* One callback. `error` is the case's value, signed: periodic kinds `current_real -
 * current_expected` on the timer's clock; RROS1_ONESHOT S4's `callback - reference - period`
 * (CLOCK_MONOTONIC, the reference read after setPeriod). `second`: periodic kinds
 * `current_expired - current_expected` (how late roscpp's timer thread queued the callback);
 * RROS1_ONESHOT `current_real - current_expected` on ROS time (the timer's own error against
 * the anchor setPeriod took). `at_monotonic`: CLOCK_MONOTONIC when the callback began. */
struct rros1_sample {
    int64_t error;
    int64_t second;
    int64_t at_monotonic;
};

/* A single-producer single-consumer ring, in memory shared with the reading process: the
 * callback writes slot `head % capacity` and then advances `head`; the reader advances
 * `tail`. A full ring drops the sample and counts it (the callback never waits). `stop`
 * set by the reader ends the spin; `skipped` counts whole periods roscpp's timer dropped
 * (current_expected more than one period after last_expected). */
struct rros1_ring {
    uint64_t capacity;
    uint64_t head;     /* atomic: written by the callback (release) */
    uint64_t tail;     /* atomic: written by the reader */
    uint64_t dropped;  /* atomic */
    uint64_t skipped;  /* atomic */
    uint32_t stop;     /* atomic */
    uint32_t pad;
    struct rros1_sample slots[];
};

/* ros::init (anonymous name `name`, no SIGINT handler, no rosout); the master is `master`
 * (NULL: ROS_MASTER_URI), this node's address `ip` (NULL: ROS_IP or the host name). Fails,
 * instead of waiting for ever, when the master does not answer within `master_timeout_ms`.
 * Once per process: a second call with the same master succeeds and does nothing. */
int rros1_init(const char *name, const char *master, const char *ip, uint32_t master_timeout_ms,
               char *err, size_t errlen);

/* Whether the master answers now (ros::master::check, within the init's timeout). */
int rros1_master_ok(void);

/* Publishers and subscribers of std_msgs/UInt8MultiArray (its `data` is rtlab's message:
 * the header, then the payload), on this process's node. `queue` is roscpp's queue size (0:
 * unbounded); `latch` keeps the last message for late subscribers. A subscriber has a
 * callback queue of its own, spun by rros1_take on the calling thread; `tcp_nodelay` and
 * `udp` are its transport hints (UDPROS: roscpp's datagram transport, TCPROS otherwise). */
void *rros1_pub_create(const char *topic, uint32_t queue, int latch, char *err, size_t errlen);
int rros1_publish(void *pub, const uint8_t *data, size_t len, char *err, size_t errlen);
uint32_t rros1_pub_subscribers(void *pub);
/* The fewest messages roscpp has written to any of the publisher's subscriber links (its
 * links' messages_sent); -1 with no link. */
int64_t rros1_pub_sent(void *pub);
void rros1_pub_delete(void *pub);
void *rros1_sub_create(const char *topic, uint32_t queue, int tcp_nodelay, int udp, char *err,
                       size_t errlen);
/* The next message: runs at most one callback of the subscriber's queue, waiting at most
 * `timeout_ns` (0: only one already there). Copies its first `cap` bytes into `buf`; returns
 * its length, 0 when none came, -1 on an error (in `err`). */
int64_t rros1_take(void *sub, uint8_t *buf, size_t cap, int64_t timeout_ns, char *err,
                   size_t errlen);
uint32_t rros1_sub_publishers(void *sub);
void rros1_sub_delete(void *sub);

/* A node handle, a callback queue of its own and a timer of `kind` and `period_ns` on it
 * (periodic kinds start at once; the one-shot kind is armed by rros1_spin). */
int rros1_timer_open(int kind, int64_t period_ns, struct rros1_ring *ring, char *err, size_t errlen);

/* Spin the queue on the calling thread until `ring->stop`, `count` callbacks (0: no limit)
 * or `deadline_monotonic_ns` (0: none). Periodic kinds: callAvailable with a 10 ms timeout,
 * as ros::spin's 100 ms one, shortened for the stop. One-shot: S4's loop. */
int rros1_spin(uint64_t count, int64_t deadline_monotonic_ns, char *err, size_t errlen);

/* The thread ids roscpp's timer thread queued callbacks from (0: none seen yet). */
int32_t rros1_timer_thread(void);

/* The callbacks the timer ran (every one, whether or not the ring had room). */
uint64_t rros1_callbacks(void);

/* The master the node registered with (ROS_MASTER_URI as roscpp read it), into `out`. */
void rros1_master(char *out, size_t outlen);

/* Stop the timer and ros::shutdown. */
void rros1_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
