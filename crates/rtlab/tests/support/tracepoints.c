/* A stand-in application for `rtlab trace`'s faults and costs: it calls ROS 2's tracepoints
 * the way rcl and the RMW do, as fast as it can, through whatever definition the dynamic
 * linker has (rtlab's interposer when preloaded; none: a local no-op).
 *
 *     tracepoints CALLS [OUT] [SECONDS] [take]
 *
 * Calls rcl_init, a node, a publisher, then CALLS x (rcl_publish + rmw_publish) (SECONDS:
 * spread evenly over that long, each pair at its due time (a spin on the clock), else back to
 * back) and writes `calls N ns_per_call X` to OUT (or stdout; X: back to back only, else 0).
 * With `take`, each message is also taken back on a subscription of the same topic and
 * handed to a callback, as rclcpp does it: rmw_take, then callback_start / callback_end of
 * a callback registered (rclcpp_callback_register) under the name `stand_in_cb`.
 * Exit 0 once every call returned. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*fn_p)(const void *);
typedef void (*fn_pp)(const void *, const void *);
typedef void (*fn_node)(const void *, const void *, const char *, const char *);
typedef void (*fn_endpoint)(const void *, const void *, const void *, const char *, size_t);
typedef void (*fn_publish)(const void *, const void *, int64_t);
typedef void (*fn_take)(const void *, const void *, int64_t, _Bool);
typedef void (*fn_pb)(const void *, _Bool);
typedef _Bool (*fn_enabled)(void);
typedef void (*fn_register)(const void *, const char *);

static void noop(void) {}

static void *tp(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    return f ? f : (void *)noop;
}

static int64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tracepoints CALLS [OUT] [SECONDS]\n");
        return 2;
    }
    long long calls = atoll(argv[1]);
    double seconds = argc > 3 ? atof(argv[3]) : 0;
    fn_p init = (fn_p)tp("ros_trace_rcl_init");
    fn_node node = (fn_node)tp("ros_trace_rcl_node_init");
    fn_endpoint pub_init = (fn_endpoint)tp("ros_trace_rcl_publisher_init");
    fn_pp rcl_publish = (fn_pp)tp("ros_trace_rcl_publish");
    fn_publish rmw_publish = (fn_publish)tp("ros_trace_rmw_publish");
    int take = argc > 4 && argv[4][0] == 't';
    fn_endpoint sub_init = (fn_endpoint)tp("ros_trace_rcl_subscription_init");
    fn_take rmw_take = (fn_take)tp("ros_trace_rmw_take");
    fn_pb cb_start = (fn_pb)tp("ros_trace_callback_start");
    fn_p cb_end = (fn_p)tp("ros_trace_callback_end");
    fn_enabled reg_enabled = (fn_enabled)dlsym(RTLD_DEFAULT, "ros_trace_enabled_rclcpp_callback_register");
    fn_register reg = (fn_register)tp("ros_trace_do_rclcpp_callback_register");
    int ctx, n, p, rp, s, rs, cb, msg;
    init(&ctx);
    node(&n, NULL, "stand_in", "/");
    pub_init(&p, &n, &rp, "/stand_in", 10);
    if (take) {
        sub_init(&s, &n, &rs, "/stand_in", 10);
        if (reg_enabled && reg_enabled())
            reg(&cb, "stand_in_cb");
    }
    int64_t start = now();
    int64_t step = calls > 0 && seconds > 0 ? (int64_t)(seconds * 1e9 / (double)calls) : 0;
    for (long long i = 0; i < calls; i++) {
        if (step)
            while (now() < start + i * step)
                ;
        rcl_publish(&p, &msg);
        rmw_publish(&rp, &msg, i);
        if (take) {
            rmw_take(&rs, &msg, i, 1);
            cb_start(&cb, 0);
            cb_end(&cb);
        }
    }
    double per = calls > 0 && !step ? (double)(now() - start) / (double)(2 * calls) : 0;
    FILE *out = argc > 2 ? fopen(argv[2], "w") : stdout;
    if (!out)
        return 1;
    fprintf(out, "calls %lld ns_per_call %.1f\n", calls, per);
    return fclose(out) == 0 ? 0 : 1;
}
