/* rtlab's tracepoint interposer, preloaded (LD_PRELOAD) by `rtlab trace` into every process
 * of the application it starts. It defines the `ros_trace_*` functions of ROS 2's
 * libtracetools that rcl, the RMW and rclcpp call; the dynamic linker binds those calls here
 * first. Each records one event into this process's ring (ring.h) and then calls the
 * installation's own function, so LTTng sees what it saw before.
 *
 * The ring is made at the process's first rcl_init. On the application's path a record is a clock read (vDSO), the CPU (rseq / vDSO), a
 * compare-and-swap and a few stores: no allocation, no lock, no system call. Once per thread
 * the thread id is read (one gettid), and once per tracepoint per process the installation's
 * function is looked up (dlsym, under the dynamic linker's lock). A full ring counts the
 * record as dropped and the application goes on. Without RTLAB_TRACE_DIR, or when the ring
 * cannot be made, nothing is recorded and every call is passed on.
 *
 * A child after fork() gets a ring of its own; a program exec()'d keeps LD_PRELOAD and
 * RTLAB_TRACE_DIR from its environment and makes its own. */
#define _GNU_SOURCE
#include "ring.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct rtlab_ring_slot) == RTLAB_RING_SLOT, "a slot is 64 bytes");
_Static_assert(offsetof(struct rtlab_ring_header, head) == 64, "head at 64");
_Static_assert(offsetof(struct rtlab_ring_header, dropped) == 72, "dropped at 72");
_Static_assert(offsetof(struct rtlab_ring_header, tail) == 128, "tail at 128");
_Static_assert(sizeof(struct rtlab_ring_header) <= RTLAB_RING_HEADER, "the header fits its page");

#define EXPORT __attribute__((visibility("default")))

static struct rtlab_ring_header *hdr;
static struct rtlab_ring_slot *slots;
static uint64_t nslots;
static __thread uint32_t my_tid;
/* The reader's tail as last read: the reader's cache line is read again only when the ring
 * looks full by it (the tail only moves forward, so an old value errs on the side of full). */
static uint64_t tail_seen;


static int64_t now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static uint64_t slots_wanted(void) {
    const char *s = getenv("RTLAB_TRACE_SLOTS");
    uint64_t n = s ? strtoull(s, NULL, 10) : RTLAB_RING_DEFAULT_SLOTS;
    if (n < RTLAB_RING_MIN_SLOTS || n > RTLAB_RING_MAX_SLOTS || (n & (n - 1)) != 0)
        n = RTLAB_RING_DEFAULT_SLOTS;
    return n;
}

/* Make this process's ring: $RTLAB_TRACE_DIR/<pid>-<CLOCK_MONOTONIC ns>.ring. */
static void open_ring(void) {
    hdr = NULL;
    slots = NULL;
    const char *dir = getenv("RTLAB_TRACE_DIR");
    if (!dir || !*dir)
        return;
    char path[4096];
    pid_t pid = getpid();
    /* named by the process and the instant: a child that forked (and got a ring) and then
     * exec'd makes a second ring under the same pid */
    int n = snprintf(path, sizeof path, "%s/%d-%lld.ring", dir, (int)pid,
                     (long long)now(CLOCK_MONOTONIC));
    if (n <= 0 || (size_t)n >= sizeof path)
        return;
    uint64_t count = slots_wanted();
    size_t size = RTLAB_RING_HEADER + count * RTLAB_RING_SLOT;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        unlink(path);
        return;
    }
    /* populated now, at rcl_init: no page fault on the application's path later */
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        unlink(path);
        return;
    }
    struct rtlab_ring_header *h = m;
    h->version = RTLAB_RING_VERSION;
    h->slot_size = RTLAB_RING_SLOT;
    h->slots = count;
    h->pid = (int32_t)pid;
    h->ppid = (int32_t)getppid();
    h->start_monotonic_ns = now(CLOCK_MONOTONIC);
    h->start_realtime_ns = now(CLOCK_REALTIME);
    prctl(PR_GET_NAME, h->comm, 0, 0, 0);
    atomic_thread_fence(memory_order_release);
    memcpy(h->magic, RTLAB_RING_MAGIC, 8);
    atomic_thread_fence(memory_order_release);
    nslots = count;
    slots = (struct rtlab_ring_slot *)((char *)m + RTLAB_RING_HEADER);
    __atomic_store_n(&hdr, h, __ATOMIC_RELEASE);
}

/* A child of a traced process gets a ring of its own (the parent's stays the parent's). */
static void after_fork(void) {
    my_tid = 0;
    tail_seen = 0;
    if (hdr)
        open_ring();
}

__attribute__((constructor)) static void start(void) {
    pthread_atfork(NULL, NULL, after_fork);
}

/* The ring is made at the process's first rcl_init (rcl's first tracepoint, before any node):
 * a process of the application that never starts ROS 2 (a shell, a launcher's helper) gets
 * none. Once, whichever thread comes first. */
static int opened;
static void open_once(void) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&opened, &expected, 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        open_ring();
}

static uint64_t reserve(struct rtlab_ring_header *h, uint32_t n) {
    uint64_t head = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
    for (;;) {
        uint64_t tail = __atomic_load_n(&tail_seen, __ATOMIC_ACQUIRE);
        if (head + n - tail > nslots) {
            tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
            __atomic_store_n(&tail_seen, tail, __ATOMIC_RELEASE);
        }
        if (head + n - tail > nslots) {
            __atomic_fetch_add(&h->dropped, 1, __ATOMIC_RELAXED);
            return UINT64_MAX;
        }
        if (__atomic_compare_exchange_n(&h->head, &head, head + n, true, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return head;
    }
}

/* Record one event, with up to two names after it. */
static void record(uint16_t kind, uint16_t flags, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
                   const char *name1, const char *name2) {
    struct rtlab_ring_header *h = __atomic_load_n(&hdr, __ATOMIC_ACQUIRE);
    if (!h)
        return;
    int64_t t = now(CLOCK_MONOTONIC);
    if (!my_tid)
        my_tid = (uint32_t)syscall(SYS_gettid);
    size_t l1 = name1 ? strnlen(name1, 200) : 0;
    size_t l2 = name2 ? strnlen(name2, 200) : 0;
    size_t text = (name1 || name2) ? l1 + 1 + l2 + 1 : 0;
    uint32_t span = 1 + (uint32_t)((text + 55) / 56);
    if (span > RTLAB_RING_MAX_SPAN)
        span = RTLAB_RING_MAX_SPAN;
    uint64_t pos = reserve(h, span);
    if (pos == UINT64_MAX)
        return;
    int cpu = sched_getcpu();
    struct rtlab_ring_slot *s = &slots[pos & (nslots - 1)];
    s->kind = kind;
    s->span = (uint16_t)span;
    s->cpu = cpu < 0 ? UINT16_MAX : (uint16_t)cpu;
    s->flags = flags;
    s->tid = my_tid;
    s->pad = 0;
    s->time_ns = t;
    s->a = a;
    s->b = b;
    s->c = c;
    s->d = d;
    if (span > 1) {
        /* the names, NUL-terminated one after the other, over the continuation slots */
        char buf[(RTLAB_RING_MAX_SPAN - 1) * 56];
        size_t cap = (span - 1) * 56, at = 0;
        memset(buf, 0, cap);
        if (name1 && at < cap) {
            size_t k = l1 < cap - 1 ? l1 : cap - 1;
            memcpy(buf, name1, k);
            at = k + 1;
        }
        if (name2 && at < cap) {
            size_t k = l2 < cap - at - 1 ? l2 : cap - at - 1;
            memcpy(buf + at, name2, k);
        }
        buf[cap - 1] = 0;
        for (uint32_t i = 1; i < span; i++) {
            struct rtlab_ring_slot *c2 = &slots[(pos + i) & (nslots - 1)];
            memcpy((char *)c2 + 8, buf + (i - 1) * 56, 56);
            __atomic_store_n(&c2->seq, pos + i + 1, __ATOMIC_RELEASE);
        }
    }
    __atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
}

/* The installation's own function, looked up once: the next definition in the global
 * scope, else libtracetools' own (loaded locally, as under rclpy's dlopen). */
static void *lookup(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        void *lib = dlopen("libtracetools.so", RTLD_NOW | RTLD_NOLOAD);
        if (lib) {
            f = dlsym(lib, name);
            dlclose(lib);
        }
    }
    return f;
}

static char none;

#define NEXT(name, type)                                                   \
    static void *next_##name;                                              \
    static type next_fn_##name(void) {                                     \
        void *f = __atomic_load_n(&next_##name, __ATOMIC_ACQUIRE);         \
        if (!f) {                                                          \
            f = lookup("ros_trace_" #name);                                \
            if (!f || f == (void *)&ros_trace_##name)                      \
                f = &none;                                                 \
            __atomic_store_n(&next_##name, f, __ATOMIC_RELEASE);           \
        }                                                                  \
        return f == &none ? NULL : (type)f;                                \
    }

#define U(p) ((uint64_t)(uintptr_t)(p))

static uint64_t gid_word(const uint8_t *gid, int i) {
    uint64_t w = 0;
    if (gid)
        memcpy(&w, gid + 8 * i, 8);
    return w;
}

typedef void (*fn_p)(const void *);
typedef void (*fn_pp)(const void *, const void *);
typedef void (*fn_pb)(const void *, bool);

EXPORT void ros_trace_rcl_init(const void *context);
NEXT(rcl_init, fn_p)
EXPORT void ros_trace_rcl_init(const void *context) {
    open_once();
    record(RTLAB_EV_RCL_INIT, 0, U(context), 0, 0, 0, NULL, NULL);
    fn_p f = next_fn_rcl_init();
    if (f)
        f(context);
}

typedef void (*fn_node)(const void *, const void *, const char *, const char *);
EXPORT void ros_trace_rcl_node_init(const void *node, const void *rmw, const char *name,
                                    const char *ns);
NEXT(rcl_node_init, fn_node)
EXPORT void ros_trace_rcl_node_init(const void *node, const void *rmw, const char *name,
                                    const char *ns) {
    record(RTLAB_EV_RCL_NODE_INIT, 0, U(node), U(rmw), 0, 0, name ? name : "", ns ? ns : "");
    fn_node f = next_fn_rcl_node_init();
    if (f)
        f(node, rmw, name, ns);
}

typedef void (*fn_gid)(const void *, const uint8_t *);
EXPORT void ros_trace_rmw_publisher_init(const void *rmw_pub, const uint8_t *gid);
NEXT(rmw_publisher_init, fn_gid)
EXPORT void ros_trace_rmw_publisher_init(const void *rmw_pub, const uint8_t *gid) {
    record(RTLAB_EV_RMW_PUBLISHER_INIT, 0, U(rmw_pub), gid_word(gid, 0), gid_word(gid, 1), 0,
           NULL, NULL);
    fn_gid f = next_fn_rmw_publisher_init();
    if (f)
        f(rmw_pub, gid);
}

EXPORT void ros_trace_rmw_subscription_init(const void *rmw_sub, const uint8_t *gid);
NEXT(rmw_subscription_init, fn_gid)
EXPORT void ros_trace_rmw_subscription_init(const void *rmw_sub, const uint8_t *gid) {
    record(RTLAB_EV_RMW_SUBSCRIPTION_INIT, 0, U(rmw_sub), gid_word(gid, 0), gid_word(gid, 1), 0,
           NULL, NULL);
    fn_gid f = next_fn_rmw_subscription_init();
    if (f)
        f(rmw_sub, gid);
}

typedef void (*fn_endpoint)(const void *, const void *, const void *, const char *, size_t);
EXPORT void ros_trace_rcl_publisher_init(const void *pub, const void *node, const void *rmw_pub,
                                         const char *topic, size_t depth);
NEXT(rcl_publisher_init, fn_endpoint)
EXPORT void ros_trace_rcl_publisher_init(const void *pub, const void *node, const void *rmw_pub,
                                         const char *topic, size_t depth) {
    record(RTLAB_EV_RCL_PUBLISHER_INIT, 0, U(pub), U(node), U(rmw_pub), (uint64_t)depth,
           topic ? topic : "", NULL);
    fn_endpoint f = next_fn_rcl_publisher_init();
    if (f)
        f(pub, node, rmw_pub, topic, depth);
}

EXPORT void ros_trace_rcl_subscription_init(const void *sub, const void *node,
                                            const void *rmw_sub, const char *topic, size_t depth);
NEXT(rcl_subscription_init, fn_endpoint)
EXPORT void ros_trace_rcl_subscription_init(const void *sub, const void *node,
                                            const void *rmw_sub, const char *topic,
                                            size_t depth) {
    record(RTLAB_EV_RCL_SUBSCRIPTION_INIT, 0, U(sub), U(node), U(rmw_sub), (uint64_t)depth,
           topic ? topic : "", NULL);
    fn_endpoint f = next_fn_rcl_subscription_init();
    if (f)
        f(sub, node, rmw_sub, topic, depth);
}

EXPORT void ros_trace_rcl_publish(const void *pub, const void *msg);
NEXT(rcl_publish, fn_pp)
EXPORT void ros_trace_rcl_publish(const void *pub, const void *msg) {
    record(RTLAB_EV_RCL_PUBLISH, 0, U(pub), U(msg), 0, 0, NULL, NULL);
    fn_pp f = next_fn_rcl_publish();
    if (f)
        f(pub, msg);
}

typedef void (*fn_rmw_publish)(const void *, const void *, int64_t);
EXPORT void ros_trace_rmw_publish(const void *rmw_pub, const void *msg, int64_t stamp);
NEXT(rmw_publish, fn_rmw_publish)
EXPORT void ros_trace_rmw_publish(const void *rmw_pub, const void *msg, int64_t stamp) {
    record(RTLAB_EV_RMW_PUBLISH, 0, U(rmw_pub), U(msg), (uint64_t)stamp, 0, NULL, NULL);
    fn_rmw_publish f = next_fn_rmw_publish();
    if (f)
        f(rmw_pub, msg, stamp);
}

typedef void (*fn_rmw_take)(const void *, const void *, int64_t, bool);
EXPORT void ros_trace_rmw_take(const void *rmw_sub, const void *msg, int64_t stamp, bool taken);
NEXT(rmw_take, fn_rmw_take)
EXPORT void ros_trace_rmw_take(const void *rmw_sub, const void *msg, int64_t stamp, bool taken) {
    /* an empty take (an executor polling) is passed on, not recorded */
    if (taken)
        record(RTLAB_EV_RMW_TAKE, 1, U(rmw_sub), U(msg), (uint64_t)stamp, 0, NULL, NULL);
    fn_rmw_take f = next_fn_rmw_take();
    if (f)
        f(rmw_sub, msg, stamp, taken);
}

EXPORT void ros_trace_rcl_take(const void *msg);
NEXT(rcl_take, fn_p)
EXPORT void ros_trace_rcl_take(const void *msg) {
    record(RTLAB_EV_RCL_TAKE, 0, 0, U(msg), 0, 0, NULL, NULL);
    fn_p f = next_fn_rcl_take();
    if (f)
        f(msg);
}

typedef void (*fn_timer)(const void *, int64_t);
EXPORT void ros_trace_rcl_timer_init(const void *timer, int64_t period);
NEXT(rcl_timer_init, fn_timer)
EXPORT void ros_trace_rcl_timer_init(const void *timer, int64_t period) {
    record(RTLAB_EV_RCL_TIMER_INIT, 0, U(timer), 0, (uint64_t)period, 0, NULL, NULL);
    fn_timer f = next_fn_rcl_timer_init();
    if (f)
        f(timer, period);
}

EXPORT void ros_trace_callback_start(const void *cb, bool intra);
NEXT(callback_start, fn_pb)
EXPORT void ros_trace_callback_start(const void *cb, bool intra) {
    record(RTLAB_EV_CALLBACK_START, intra ? 1 : 0, U(cb), 0, 0, 0, NULL, NULL);
    fn_pb f = next_fn_callback_start();
    if (f)
        f(cb, intra);
}

EXPORT void ros_trace_callback_end(const void *cb);
NEXT(callback_end, fn_p)
EXPORT void ros_trace_callback_end(const void *cb) {
    record(RTLAB_EV_CALLBACK_END, 0, U(cb), 0, 0, 0, NULL, NULL);
    fn_p f = next_fn_callback_end();
    if (f)
        f(cb);
}

#define PAIR(name, kind)                                   \
    EXPORT void ros_trace_##name(const void *x, const void *y); \
    NEXT(name, fn_pp)                                      \
    EXPORT void ros_trace_##name(const void *x, const void *y) { \
        record(kind, 0, U(x), U(y), 0, 0, NULL, NULL);     \
        fn_pp f = next_fn_##name();                        \
        if (f)                                             \
            f(x, y);                                       \
    }

PAIR(rclcpp_subscription_init, RTLAB_EV_RCLCPP_SUBSCRIPTION_INIT)
PAIR(rclcpp_subscription_callback_added, RTLAB_EV_RCLCPP_SUBSCRIPTION_CALLBACK)
PAIR(rclcpp_timer_callback_added, RTLAB_EV_RCLCPP_TIMER_CALLBACK)
PAIR(rclcpp_timer_link_node, RTLAB_EV_RCLCPP_TIMER_LINK_NODE)
PAIR(rclcpp_publish, RTLAB_EV_RCLCPP_PUBLISH)

EXPORT void ros_trace_rclcpp_take(const void *msg);
NEXT(rclcpp_take, fn_p)
EXPORT void ros_trace_rclcpp_take(const void *msg) {
    record(RTLAB_EV_RCLCPP_TAKE, 0, 0, U(msg), 0, 0, NULL, NULL);
    fn_p f = next_fn_rclcpp_take();
    if (f)
        f(msg);
}

/* rclcpp names a callback's function only where the tracepoint says it is enabled: it is,
 * while rtlab traces. */
typedef void (*fn_register)(const void *, const char *);
EXPORT bool ros_trace_enabled_rclcpp_callback_register(void) { return hdr != NULL; }
EXPORT void ros_trace_do_rclcpp_callback_register(const void *cb, const char *symbol);
NEXT(do_rclcpp_callback_register, fn_register)
EXPORT void ros_trace_do_rclcpp_callback_register(const void *cb, const char *symbol) {
    record(RTLAB_EV_RCLCPP_CALLBACK_REGISTER, 0, U(cb), 0, 0, 0, symbol ? symbol : "", NULL);
    fn_register f = next_fn_do_rclcpp_callback_register();
    if (f)
        f(cb, symbol);
}
EXPORT void ros_trace_rclcpp_callback_register(const void *cb, const char *symbol);
NEXT(rclcpp_callback_register, fn_register)
EXPORT void ros_trace_rclcpp_callback_register(const void *cb, const char *symbol) {
    record(RTLAB_EV_RCLCPP_CALLBACK_REGISTER, 0, U(cb), 0, 0, 0, symbol ? symbol : "", NULL);
    fn_register f = next_fn_rclcpp_callback_register();
    if (f)
        f(cb, symbol);
}
