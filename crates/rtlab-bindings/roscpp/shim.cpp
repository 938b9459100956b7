// rtlab's shim over roscpp (shim.h documents the API). One node per process, one timer on a
// callback queue of its own; the callback writes one rros1_sample into the shared ring and
// allocates nothing (its boost::function and the queue's entry are roscpp's, made when the
// timer fires; the sample path itself is stores and one atomic).
#include "shim.h"

#include <ros/callback_queue.h>
#include <ros/console.h>
#include <ros/master.h>
#include <ros/publication.h>
#include <ros/ros.h>
#include <ros/topic_manager.h>
#include <std_msgs/UInt8MultiArray.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

namespace {

int fail(char *err, size_t errlen, const char *what) {
    if (err && errlen) {
        std::snprintf(err, errlen, "%s", what);
    }
    return -1;
}

int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A callback queue that notes the thread that adds to it: roscpp's timer thread.
class SeenQueue : public ros::CallbackQueue {
  public:
    std::atomic<int32_t> adder{0};
    void addCallback(const ros::CallbackInterfacePtr &cb, uint64_t removal_id) override {
        adder.store(int32_t(syscall(SYS_gettid)), std::memory_order_relaxed);
        ros::CallbackQueue::addCallback(cb, removal_id);
    }
};

struct Node {
    int kind = RROS1_TIMER;
    int64_t period_ns = 0;
    rros1_ring *ring = nullptr;
    std::unique_ptr<ros::NodeHandle> nh;
    SeenQueue queue;
    ros::Timer timer;
    ros::WallTimer wall;
    ros::SteadyTimer steady;
    uint64_t called = 0;
    int64_t last_expected = 0;
    // the one-shot test's reference + period, and whether its callback ran
    int64_t oneshot_expected = 0;
    bool oneshot_called = false;

    void push(int64_t error, int64_t second, int64_t at) {
        uint64_t h = __atomic_load_n(&ring->head, __ATOMIC_RELAXED);
        uint64_t t = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
        called++;
        if (h - t >= ring->capacity) {
            __atomic_fetch_add(&ring->dropped, 1, __ATOMIC_RELAXED);
            return;
        }
        rros1_sample &s = ring->slots[h % ring->capacity];
        s.error = error;
        s.second = second;
        s.at_monotonic = at;
        __atomic_store_n(&ring->head, h + 1, __ATOMIC_RELEASE);
    }

    template <class Event> void periodic(const Event &e) {
        int64_t at = monotonic_ns();
        int64_t expected = int64_t(e.current_expected.toNSec());
        if (last_expected != 0 && expected - last_expected > period_ns + period_ns / 2) {
            uint64_t lost = uint64_t((expected - last_expected) / period_ns) - 1;
            __atomic_fetch_add(&ring->skipped, lost, __ATOMIC_RELAXED);
        }
        last_expected = expected;
        push(int64_t(e.current_real.toNSec()) - expected,
             int64_t(e.current_expired.toNSec()) - expected, at);
    }
    void on_timer(const ros::TimerEvent &e) { periodic(e); }
    void on_wall(const ros::WallTimerEvent &e) { periodic(e); }
    void on_steady(const ros::SteadyTimerEvent &e) { periodic(e); }
    // S4's timerCallback: read CLOCK_MONOTONIC, say the callback ran
    void on_oneshot(const ros::TimerEvent &e) {
        int64_t now = monotonic_ns();
        push(now - oneshot_expected,
             int64_t(e.current_real.toNSec()) - int64_t(e.current_expected.toNSec()), now);
        oneshot_called = true;
    }
};

Node *node = nullptr;
// this process's node is made once, by one thread at a time: a second thread asking while
// the first is inside ros::init saw ros::isInitialized() before master_uri was written
std::mutex init_lock;
std::string master_uri;

}  // namespace

extern "C" int rros1_init(const char *name, const char *master, const char *ip,
                          uint32_t master_timeout_ms, char *err, size_t errlen) {
    try {
        std::unique_lock<std::mutex> one_at_a_time(init_lock);
        if (!ros::isInitialized()) {
            ros::M_string remappings;
            if (master) {
                remappings["__master"] = master;
            }
            if (ip) {
                remappings["__ip"] = ip;
            }
            ros::init(remappings, name,
                      ros::init_options::AnonymousName | ros::init_options::NoSigintHandler |
                          ros::init_options::NoRosout);
            if (ros::console::set_logger_level(ROSCONSOLE_DEFAULT_NAME,
                                               ros::console::levels::Fatal)) {
                ros::console::notifyLoggerLevelsChanged();
            }
            master_uri = ros::master::getURI();
            ros::master::setRetryTimeout(ros::WallDuration(master_timeout_ms / 1000.0));
        } else if (master && master_uri != master) {
            std::string m = "this process's node already uses the master at " + master_uri;
            return fail(err, errlen, m.c_str());
        }
        one_at_a_time.unlock();
        if (!ros::master::check()) {
            std::string m = "the ROS master at " + master_uri + " (ROS_MASTER_URI) does not answer";
            return fail(err, errlen, m.c_str());
        }
        return 0;
    } catch (const std::exception &e) {
        return fail(err, errlen, e.what());
    }
}

extern "C" int rros1_master_ok(void) { return ros::isInitialized() && ros::master::check(); }

namespace {

struct Pub {
    ros::NodeHandle nh;
    ros::Publisher pub;
    std_msgs::UInt8MultiArray msg;
};

struct Sub {
    ros::NodeHandle nh;
    ros::CallbackQueue queue;
    ros::Subscriber sub;
    std_msgs::UInt8MultiArray::ConstPtr last;
    void on_message(const std_msgs::UInt8MultiArray::ConstPtr &m) { last = m; }
};

}  // namespace

extern "C" void *rros1_pub_create(const char *topic, uint32_t queue, int latch, char *err,
                                  size_t errlen) {
    try {
        std::unique_ptr<Pub> p(new Pub());
        p->pub = p->nh.advertise<std_msgs::UInt8MultiArray>(topic, queue, latch != 0);
        if (!p->pub) {
            fail(err, errlen, "advertise failed");
            return nullptr;
        }
        return p.release();
    } catch (const std::exception &e) {
        fail(err, errlen, e.what());
        return nullptr;
    }
}

extern "C" int rros1_publish(void *pub, const uint8_t *data, size_t len, char *err,
                             size_t errlen) {
    try {
        Pub *p = static_cast<Pub *>(pub);
        // the message keeps its vector: after the first publish of a length, no allocation
        // here (roscpp serializes into a buffer of its own)
        p->msg.data.assign(data, data + len);
        p->pub.publish(p->msg);
        return 0;
    } catch (const std::exception &e) {
        return fail(err, errlen, e.what());
    }
}

extern "C" uint32_t rros1_pub_subscribers(void *pub) {
    return static_cast<Pub *>(pub)->pub.getNumSubscribers();
}

extern "C" int64_t rros1_pub_sent(void *pub) {
    try {
        Pub *p = static_cast<Pub *>(pub);
        ros::PublicationPtr publication =
            ros::TopicManager::instance()->lookupPublication(p->pub.getTopic());
        if (!publication) {
            return -1;
        }
        // [name, [[connection id, bytes sent, data sent, messages sent, connected], ...]]
        XmlRpc::XmlRpcValue stats = publication->getStats();
        int64_t fewest = -1;
        for (int i = 0; i < stats[1].size(); ++i) {
            int64_t sent = int(stats[1][i][3]);
            fewest = fewest < 0 || sent < fewest ? sent : fewest;
        }
        return fewest;
    } catch (const std::exception &) {
        return -1;
    }
}

extern "C" void rros1_pub_delete(void *pub) { delete static_cast<Pub *>(pub); }

extern "C" void *rros1_sub_create(const char *topic, uint32_t queue, int tcp_nodelay, int udp,
                                  char *err, size_t errlen) {
    try {
        std::unique_ptr<Sub> s(new Sub());
        s->nh.setCallbackQueue(&s->queue);
        ros::TransportHints hints;
        if (udp) {
            hints = hints.udp();
        } else {
            hints = hints.tcp();
        }
        if (tcp_nodelay) {
            hints = hints.tcpNoDelay();
        }
        s->sub = s->nh.subscribe(topic, queue, &Sub::on_message, s.get(), hints);
        if (!s->sub) {
            fail(err, errlen, "subscribe failed");
            return nullptr;
        }
        return s.release();
    } catch (const std::exception &e) {
        fail(err, errlen, e.what());
        return nullptr;
    }
}

extern "C" int64_t rros1_take(void *sub, uint8_t *buf, size_t cap, int64_t timeout_ns,
                              char *err, size_t errlen) {
    try {
        Sub *s = static_cast<Sub *>(sub);
        s->last.reset();
        s->queue.callOne(ros::WallDuration().fromNSec(timeout_ns > 0 ? timeout_ns : 0));
        if (!s->last) {
            return 0;
        }
        const std::vector<uint8_t> &d = s->last->data;
        std::memcpy(buf, d.data(), d.size() < cap ? d.size() : cap);
        int64_t n = int64_t(d.size());
        s->last.reset();
        return n;
    } catch (const std::exception &e) {
        fail(err, errlen, e.what());
        return -1;
    }
}

extern "C" uint32_t rros1_sub_publishers(void *sub) {
    return static_cast<Sub *>(sub)->sub.getNumPublishers();
}

extern "C" void rros1_sub_delete(void *sub) { delete static_cast<Sub *>(sub); }

extern "C" int rros1_timer_open(int kind, int64_t period_ns, rros1_ring *ring, char *err,
                                size_t errlen) {
    if (node) {
        return fail(err, errlen, "this process already has a timer");
    }
    if (period_ns <= 0 || !ring || ring->capacity == 0) {
        return fail(err, errlen, "a timer needs a period above zero and a ring");
    }
    try {
        std::unique_ptr<Node> n(new Node());
        n->kind = kind;
        n->period_ns = period_ns;
        n->ring = ring;
        n->nh.reset(new ros::NodeHandle());
        n->nh->setCallbackQueue(&n->queue);
        Node *p = n.get();
        switch (kind) {
        case RROS1_TIMER:
            p->timer = p->nh->createTimer(ros::Duration().fromNSec(period_ns), &Node::on_timer, p);
            break;
        case RROS1_WALL:
            p->wall = p->nh->createWallTimer(ros::WallDuration().fromNSec(period_ns),
                                             &Node::on_wall, p);
            break;
        case RROS1_STEADY:
            p->steady = p->nh->createSteadyTimer(ros::WallDuration().fromNSec(period_ns),
                                                 &Node::on_steady, p);
            break;
        case RROS1_ONESHOT:
            // as the suite: a one-shot timer, re-armed by setPeriod in each loop
            p->timer = p->nh->createTimer(ros::Duration().fromNSec(period_ns), &Node::on_oneshot,
                                          p, true, false);
            // roscpp starts its timer thread with the first timer it holds: started and
            // stopped here, so that the thread exists once the timer does (a policy set
            // after this, `after-init`, does not reach it, as with the periodic timers)
            p->timer.start();
            p->timer.stop();
            break;
        default:
            return fail(err, errlen, "unknown timer kind");
        }
        node = n.release();
        return 0;
    } catch (const std::exception &e) {
        return fail(err, errlen, e.what());
    }
}

extern "C" int rros1_spin(uint64_t count, int64_t deadline_monotonic_ns, char *err, size_t errlen) {
    if (!node) {
        return fail(err, errlen, "no timer to spin");
    }
    Node *n = node;
    auto done = [&]() {
        return __atomic_load_n(&n->ring->stop, __ATOMIC_RELAXED) != 0 ||
               (count != 0 && n->called >= count) ||
               (deadline_monotonic_ns != 0 && monotonic_ns() >= deadline_monotonic_ns) ||
               !ros::ok();
    };
    try {
        if (n->kind != RROS1_ONESHOT) {
            while (!done()) {
                n->queue.callAvailable(ros::WallDuration(0.01));
            }
            return 0;
        }
        // S4's loop (OneShotLatencyMeasurer): setPeriod, then the reference, then start (a
        // no-op once started), then spinOnce busy on this thread until the callback ran
        ros::Duration period = ros::Duration().fromNSec(n->period_ns);
        bool started = false;
        while (!done()) {
            n->oneshot_called = false;
            n->timer.setPeriod(period);
            n->oneshot_expected = monotonic_ns() + n->period_ns;
            if (!started) {
                n->timer.start();
                started = true;
            }
            while (!n->oneshot_called && !done()) {
                n->queue.callAvailable(ros::WallDuration());
            }
        }
        return 0;
    } catch (const std::exception &e) {
        return fail(err, errlen, e.what());
    }
}

extern "C" int32_t rros1_timer_thread(void) {
    return node ? node->queue.adder.load(std::memory_order_relaxed) : 0;
}

extern "C" uint64_t rros1_callbacks(void) { return node ? node->called : 0; }

extern "C" void rros1_master(char *out, size_t outlen) {
    if (out && outlen) {
        std::lock_guard<std::mutex> made(init_lock);
        std::snprintf(out, outlen, "%s", master_uri.c_str());
    }
}

extern "C" void rros1_shutdown(void) {
    if (node) {
        node->timer.stop();
        node->wall.stop();
        node->steady.stop();
        node->queue.disable();
        node->queue.clear();
        node->nh.reset();
    }
    if (ros::isInitialized()) {
        ros::shutdown();
    }
}
