/* A stand-in application for `rtlab trace`'s faults and costs: it calls ROS 2's tracepoints
 * the way rcl and the RMW do, as fast as it can, through whatever definition the dynamic
 * linker has (rtlab's interposer when preloaded; none: a local no-op).
 *
 *     tracepoints CALLS [OUT] [SECONDS]
 *
 * Calls rcl_init, a node, a publisher, then CALLS x (rcl_publish + rmw_publish) (SECONDS:
 * spread evenly over that long, each pair at its due time (a spin on the clock), else back to
 * back) and writes `calls N ns_per_call X` to OUT (or stdout; X: back to back only, else 0).
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
    int ctx, n, p, rp, msg;
    init(&ctx);
    node(&n, NULL, "stand_in", "/");
    pub_init(&p, &n, &rp, "/stand_in", 10);
    int64_t start = now();
    int64_t step = calls > 0 && seconds > 0 ? (int64_t)(seconds * 1e9 / (double)calls) : 0;
    for (long long i = 0; i < calls; i++) {
        if (step)
            while (now() < start + i * step)
                ;
        rcl_publish(&p, &msg);
        rmw_publish(&rp, &msg, i);
    }
    double per = calls > 0 && !step ? (double)(now() - start) / (double)(2 * calls) : 0;
    FILE *out = argc > 2 ? fopen(argv[2], "w") : stdout;
    if (!out)
        return 1;
    fprintf(out, "calls %lld ns_per_call %.1f\n", calls, per);
    return fclose(out) == 0 ? 0 : 1;
}
