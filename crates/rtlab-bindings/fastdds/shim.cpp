// rtlab's C API over eProsima Fast DDS 2.9 (see shim.h). The topic type is written by hand
// (no fastddsgen): samples are the bytes rtlab serialized (crate::ros_msg), the 4-byte CDR
// encapsulation header first. Fast DDS keeps that header inside SerializedPayload_t::data
// (generated types write it with Cdr::serialize_encapsulation into the same buffer) and
// mirrors it in SerializedPayload_t::encapsulation, so serialize copies the bytes whole and
// sets `encapsulation` from them; deserialize copies the bytes whole (header included) out.
// The publish/take paths here do not allocate (Fast DDS's own pools do what they do).
//
// It compiles against Fast DDS 2.9 (Debian's, the default) and against Fast DDS 3 (the one a
// ROS 2 installation's rmw_fastrtps_cpp runs on: 3.2 in the package registry's ROS 2, built
// by build.rs when that installation is there): the few names that differ are mapped below.
#include "shim.h"

#if __has_include(<fastdds/config.hpp>)
#include <fastdds/config.hpp>
#endif
#if defined(FASTDDS_VERSION_MAJOR) && FASTDDS_VERSION_MAJOR >= 3
#define RTLAB_FASTDDS3 1
#endif

#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/domain/qos/DomainParticipantQos.hpp>
#include <fastdds/dds/log/Log.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/DataReaderListener.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/Topic.hpp>
#include <fastdds/dds/topic/TopicDataType.hpp>
#include <fastdds/dds/topic/TypeSupport.hpp>
#ifdef RTLAB_FASTDDS3
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.hpp>
#include <fastdds/rtps/transport/shared_mem/SharedMemTransportDescriptor.hpp>
#include <fastdds/utils/IPLocator.hpp>
#else
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.h>
#include <fastdds/rtps/transport/shared_mem/SharedMemTransportDescriptor.h>
#include <fastrtps/utils/IPLocator.h>
#endif

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

using namespace eprosima::fastdds::dds;
#ifdef RTLAB_FASTDDS3
namespace rtps_ns = eprosima::fastdds::rtps;
using Duration = eprosima::fastdds::dds::Duration_t;
// Fast DDS 3's return codes are plain integers
#define RC(name) (name)
#else
namespace rtps_ns = eprosima::fastrtps::rtps;
using Duration = eprosima::fastrtps::Duration_t;
#define RC(name) (ReturnCode_t::name)
#endif
using rtps_ns::IPLocator;
using rtps_ns::Locator_t;
using rtps_ns::SerializedPayload_t;
using rtps_ns::InstanceHandle_t;

namespace {

// What rtlab hands to DataWriter::write.
struct OutSample {
    const uint8_t *bytes;
    size_t len;
};

// What DataReader::take_next_sample fills (the caller's buffer).
struct InSample {
    uint8_t *buf;
    size_t cap;
    size_t size;
    size_t copied;
};

// The probe message's type: keyless, unbounded, samples serialized by the caller.
class BytesType : public TopicDataType {
public:
    explicit BytesType(const char *name) {
#ifdef RTLAB_FASTDDS3
        set_name(name);
        // Only the first allocation of a history slot (PREALLOCATED_WITH_REALLOC grows it):
        // large enough for small messages, small enough that depth x size stays modest.
        max_serialized_type_size = 4096;
        is_compute_key_provided = false;
        // Fast DDS 3 registers no type object unless the type provides one (this one does
        // not): matched by name, as Cyclone's blob topics and ROS 2 nodes' types are
#else
        setName(name);
        m_typeSize = 4096;
        m_isGetKeyDefined = false;
        // no TypeObject/TypeInformation: the type is matched by name, as Cyclone's blob
        // topics (rtlab's dds transport) and ROS 2 nodes' types are
        auto_fill_type_object(false);
        auto_fill_type_information(false);
#endif
    }
    static bool write_bytes(const void *data, SerializedPayload_t &payload) {
        const OutSample *s = static_cast<const OutSample *>(data);
        if (s->len < 4 || s->len > payload.max_size) {
            return false;
        }
        std::memcpy(payload.data, s->bytes, s->len);
        payload.length = static_cast<uint32_t>(s->len);
        // bytes 0-1: the representation identifier (big endian), 0x0000 CDR_BE, 0x0001 CDR_LE
        payload.encapsulation = static_cast<uint16_t>((s->bytes[0] << 8) | s->bytes[1]);
        return true;
    }
    static bool read_bytes(const SerializedPayload_t &payload, void *data) {
        InSample *s = static_cast<InSample *>(data);
        s->size = payload.length;
        s->copied = payload.length < s->cap ? payload.length : s->cap;
        if (s->copied > 0) {
            std::memcpy(s->buf, payload.data, s->copied);
        }
        return true;
    }
    static uint32_t size_of(const void *data) {
        return static_cast<uint32_t>(static_cast<const OutSample *>(data)->len);
    }
#ifdef RTLAB_FASTDDS3
    bool serialize(const void *data, SerializedPayload_t &payload, DataRepresentationId_t) override {
        return write_bytes(data, payload);
    }
    bool deserialize(SerializedPayload_t &payload, void *data) override { return read_bytes(payload, data); }
    uint32_t calculate_serialized_size(const void *data, DataRepresentationId_t) override {
        return size_of(data);
    }
    void *create_data() override { return new InSample{nullptr, 0, 0, 0}; }
    void delete_data(void *data) override { delete static_cast<InSample *>(data); }
    bool compute_key(SerializedPayload_t &, InstanceHandle_t &, bool) override { return false; }
    bool compute_key(const void *const, InstanceHandle_t &, bool) override { return false; }
    bool is_bounded() const override { return false; }
    bool is_plain(DataRepresentationId_t) const override { return false; }
#else
    bool serialize(void *data, SerializedPayload_t *payload) override { return write_bytes(data, *payload); }
    bool deserialize(SerializedPayload_t *payload, void *data) override { return read_bytes(*payload, data); }
    std::function<uint32_t()> getSerializedSizeProvider(void *data) override {
        const uint32_t n = size_of(data);
        return [n]() { return n; };
    }
    void *createData() override { return new InSample{nullptr, 0, 0, 0}; }
    void deleteData(void *data) override { delete static_cast<InSample *>(data); }
    bool getKey(void *, InstanceHandle_t *, bool) override { return false; }
    bool is_bounded() const override { return false; }
    bool is_plain() const override { return false; }
#endif
};

void set_err(char *err, size_t err_len, const std::string &what) {
    if (err && err_len > 0) {
        std::snprintf(err, err_len, "%s", what.c_str());
    }
}

int32_t clamp_depth(int32_t d) { return d < 1 ? 1 : d; }

}  // namespace

struct fdds_participant {
    DomainParticipant *dp = nullptr;
    Publisher *pub = nullptr;
    Subscriber *sub = nullptr;
    // Fast DDS allows one Topic object per name in a participant: ports of one topic share
    // it (counted); types are registered once per name. Setup only, never per message.
    std::mutex lock;
    std::map<std::string, std::pair<Topic *, int>> topics;
    std::map<std::string, TypeSupport> types;
};

struct fdds_writer {
    fdds_participant *p;
    Topic *topic;
    DataWriter *w;
};

// A reader's data-available listener: calls rtlab's function with its argument and the
// DataReader to take from (the one Fast DDS names, valid for the call). Fast DDS does not wait
// for a running listener call when a reader is deleted, so the listener counts its calls:
// close() returns once none runs, and no later one reaches rtlab's function.
class CallbackListener : public DataReaderListener {
public:
    CallbackListener(fdds_on_data cb, void *arg) : cb_(cb), arg_(arg) {}
    void on_data_available(DataReader *reader) override {
        calls_.fetch_add(1);
        if (!closed_.load()) {
            cb_(arg_, reader);
        }
        calls_.fetch_sub(1);
    }
    void close() {
        closed_.store(true);
        while (calls_.load() != 0) {
            std::this_thread::yield();
        }
    }

private:
    fdds_on_data cb_;
    void *arg_;
    std::atomic<int> calls_{0};
    std::atomic<bool> closed_{false};
};

struct fdds_reader {
    fdds_participant *p;
    Topic *topic;
    DataReader *r;
    SampleInfo info;
    // deleted after the reader (no call runs once delete_datareader returned)
    std::unique_ptr<CallbackListener> listener;
};

extern "C" int fdds_participant_create(const fdds_net *net, fdds_participant **out, char *err,
                                       size_t err_len) {
    try {
        // Fast DDS logs errors to stdout by default; rtlab never prints (errors come back
        // as return codes).
        Log::ClearConsumers();
        DomainParticipantQos q = PARTICIPANT_QOS_DEFAULT;
        q.name("rtlab");
        q.transport().use_builtin_transports = false;
        auto udp = std::make_shared<eprosima::fastdds::rtps::UDPv4TransportDescriptor>();
        for (size_t i = 0; i < net->n_whitelist; ++i) {
            udp->interfaceWhiteList.emplace_back(net->whitelist[i]);
        }
        udp->receiveBufferSize = net->receive_buffer;
        udp->sendBufferSize = net->send_buffer;
        if (net->max_initial_peers > 0) {
            udp->maxInitialPeersRange = net->max_initial_peers;
        }
        if (net->shm) {
            auto shm = std::make_shared<eprosima::fastdds::rtps::SharedMemTransportDescriptor>();
            if (net->shm_segment > 0) {
                shm->segment_size(net->shm_segment);
            }
            q.transport().user_transports.push_back(shm);
        }
        q.transport().user_transports.push_back(udp);
        if (net->n_peers > 0) {
            // Fast DDS's "disabling all multicast traffic": no metatraffic multicast locator,
            // one unicast metatraffic locator with null address and port (well-known port on
            // every allowed interface), discovery announced to the initial peers only.
            auto &b = q.wire_protocol().builtin;
            b.metatrafficMulticastLocatorList.clear();
            b.metatrafficUnicastLocatorList.clear();
            b.metatrafficUnicastLocatorList.push_back(Locator_t());
            b.initialPeersList.clear();
            for (size_t i = 0; i < net->n_peers; ++i) {
                Locator_t l;
                if (!IPLocator::setIPv4(l, std::string(net->peers[i].address))) {
                    set_err(err, err_len,
                            std::string("peer ") + net->peers[i].address + " is not an IPv4 address");
                    return -1;
                }
                l.port = net->peers[i].port;
                b.initialPeersList.push_back(l);
            }
        }
        DomainParticipant *dp =
            DomainParticipantFactory::get_instance()->create_participant(net->domain, q);
        if (!dp) {
            set_err(err, err_len, "create_participant failed (domain " + std::to_string(net->domain) + ")");
            return -1;
        }
        std::unique_ptr<fdds_participant> p(new fdds_participant);
        p->dp = dp;
        p->pub = dp->create_publisher(PUBLISHER_QOS_DEFAULT);
        p->sub = dp->create_subscriber(SUBSCRIBER_QOS_DEFAULT);
        if (!p->pub || !p->sub) {
            dp->delete_contained_entities();
            DomainParticipantFactory::get_instance()->delete_participant(dp);
            set_err(err, err_len, "create_publisher/create_subscriber failed");
            return -1;
        }
        *out = p.release();
        return 0;
    } catch (const std::exception &e) {
        set_err(err, err_len, std::string("exception: ") + e.what());
        return -1;
    }
}

extern "C" void fdds_participant_delete(fdds_participant *p) {
    if (!p) {
        return;
    }
    p->dp->delete_contained_entities();
    DomainParticipantFactory::get_instance()->delete_participant(p->dp);
    delete p;
}

namespace {

template <typename Q>
void apply(Q &q, const fdds_qos *qos) {
    q.reliability().kind = qos->reliable ? RELIABLE_RELIABILITY_QOS : BEST_EFFORT_RELIABILITY_QOS;
    if (qos->reliable) {
        q.reliability().max_blocking_time = Duration(1, 0);
    }
    q.durability().kind = qos->transient_local ? TRANSIENT_LOCAL_DURABILITY_QOS : VOLATILE_DURABILITY_QOS;
    if (qos->keep_all) {
        q.history().kind = KEEP_ALL_HISTORY_QOS;
        // keep-all is bounded only by the resource limits: make them unlimited
        q.resource_limits().max_samples = LENGTH_UNLIMITED;
        q.resource_limits().max_samples_per_instance = LENGTH_UNLIMITED;
    } else {
        const int32_t d = clamp_depth(qos->depth);
        q.history().kind = KEEP_LAST_HISTORY_QOS;
        q.history().depth = d;
        if (q.resource_limits().max_samples_per_instance < d) {
            q.resource_limits().max_samples_per_instance = d;
        }
        if (q.resource_limits().max_samples < d) {
            q.resource_limits().max_samples = d;
        }
    }
    if (q.resource_limits().allocated_samples > 16) {
        q.resource_limits().allocated_samples = 16;  // grown on demand
    }
    q.endpoint().history_memory_policy =
        rtps_ns::PREALLOCATED_WITH_REALLOC_MEMORY_MODE;
}

Topic *topic_of(fdds_participant *p, const char *topic, const char *type_name, char *err,
                size_t err_len) {
    std::lock_guard<std::mutex> g(p->lock);
    auto t = p->types.find(type_name);
    if (t == p->types.end()) {
        TypeSupport ts(new BytesType(type_name));
        if (ts.register_type(p->dp) != RC(RETCODE_OK)) {
            set_err(err, err_len, std::string("register_type ") + type_name + " failed");
            return nullptr;
        }
        t = p->types.emplace(type_name, ts).first;
    }
    auto e = p->topics.find(topic);
    if (e != p->topics.end()) {
        if (e->second.first->get_type_name() != type_name) {
            set_err(err, err_len, std::string("topic ") + topic + " is already open with type " +
                                      e->second.first->get_type_name());
            return nullptr;
        }
        e->second.second += 1;
        return e->second.first;
    }
    Topic *tp = p->dp->create_topic(topic, type_name, TOPIC_QOS_DEFAULT);
    if (!tp) {
        set_err(err, err_len, std::string("create_topic ") + topic + " failed");
        return nullptr;
    }
    p->topics.emplace(topic, std::make_pair(tp, 1));
    return tp;
}

void topic_release(fdds_participant *p, Topic *t) {
    std::lock_guard<std::mutex> g(p->lock);
    auto e = p->topics.find(t->get_name());
    if (e != p->topics.end() && --e->second.second == 0) {
        p->topics.erase(e);
        p->dp->delete_topic(t);
    }
}

}  // namespace

extern "C" int fdds_writer_create(fdds_participant *p, const char *topic, const char *type_name,
                                  const fdds_qos *qos, fdds_writer **out, char *err, size_t err_len) {
    try {
        std::unique_ptr<fdds_writer> w(new fdds_writer{p, nullptr, nullptr});
        w->topic = topic_of(p, topic, type_name, err, err_len);
        if (!w->topic) {
            return -1;
        }
        DataWriterQos q = DATAWRITER_QOS_DEFAULT;
        apply(q, qos);
        q.data_sharing().off();
        w->w = p->pub->create_datawriter(w->topic, q);
        if (!w->w) {
            topic_release(p, w->topic);
            set_err(err, err_len, std::string("create_datawriter on ") + topic + " failed (QoS refused?)");
            return -1;
        }
        *out = w.release();
        return 0;
    } catch (const std::exception &e) {
        set_err(err, err_len, std::string("exception: ") + e.what());
        return -1;
    }
}

extern "C" int fdds_write(fdds_writer *w, const uint8_t *sample, size_t len) {
    OutSample s{sample, len};
#ifdef RTLAB_FASTDDS3
    return w->w->write(&s) == RETCODE_OK ? 0 : -1;
#else
    return w->w->write(&s) ? 0 : -1;
#endif
}

extern "C" int32_t fdds_writer_matched(fdds_writer *w) {
    PublicationMatchedStatus st;
    if (w->w->get_publication_matched_status(st) != RC(RETCODE_OK)) {
        return -1;
    }
    return st.current_count;
}

extern "C" int fdds_writer_wait_acked(fdds_writer *w, int64_t timeout_ns) {
    const ReturnCode_t rc = w->w->wait_for_acknowledgments(Duration(
        static_cast<int32_t>(timeout_ns / 1000000000), static_cast<uint32_t>(timeout_ns % 1000000000)));
    if (rc == RC(RETCODE_OK)) {
        return 1;
    }
    return rc == RC(RETCODE_TIMEOUT) ? 0 : -1;
}

extern "C" void fdds_writer_delete(fdds_writer *w, int64_t drain_ns) {
    if (!w) {
        return;
    }
    if (drain_ns > 0 && w->w->get_qos().reliability().kind == RELIABLE_RELIABILITY_QOS) {
        w->w->wait_for_acknowledgments(Duration(
            static_cast<int32_t>(drain_ns / 1000000000), static_cast<uint32_t>(drain_ns % 1000000000)));
    }
    w->p->pub->delete_datawriter(w->w);
    topic_release(w->p, w->topic);
    delete w;
}

static int reader_create(fdds_participant *p, const char *topic, const char *type_name,
                         const fdds_qos *qos, fdds_on_data cb, void *arg, fdds_reader **out,
                         char *err, size_t err_len) {
    try {
        std::unique_ptr<fdds_reader> r(new fdds_reader{p, nullptr, nullptr, SampleInfo(), nullptr});
        if (cb) {
            r->listener.reset(new CallbackListener(cb, arg));
        }
        r->topic = topic_of(p, topic, type_name, err, err_len);
        if (!r->topic) {
            return -1;
        }
        DataReaderQos q = DATAREADER_QOS_DEFAULT;
        apply(q, qos);
        q.data_sharing().off();
        r->r = r->listener ? p->sub->create_datareader(r->topic, q, r->listener.get(),
                                                       StatusMask::data_available())
                           : p->sub->create_datareader(r->topic, q);
        if (!r->r) {
            topic_release(p, r->topic);
            set_err(err, err_len, std::string("create_datareader on ") + topic + " failed (QoS refused?)");
            return -1;
        }
        *out = r.release();
        return 0;
    } catch (const std::exception &e) {
        set_err(err, err_len, std::string("exception: ") + e.what());
        return -1;
    }
}

extern "C" int fdds_reader_create(fdds_participant *p, const char *topic, const char *type_name,
                                  const fdds_qos *qos, fdds_reader **out, char *err, size_t err_len) {
    return reader_create(p, topic, type_name, qos, nullptr, nullptr, out, err, err_len);
}

extern "C" int fdds_reader_create_listened(fdds_participant *p, const char *topic,
                                           const char *type_name, const fdds_qos *qos,
                                           fdds_on_data cb, void *arg, fdds_reader **out,
                                           char *err, size_t err_len) {
    return reader_create(p, topic, type_name, qos, cb, arg, out, err, err_len);
}

static int take_from(DataReader *r, SampleInfo *info, uint8_t *buf, size_t cap, size_t *size,
                     size_t *copied) {
    InSample s{buf, cap, 0, 0};
    ReturnCode_t rc = r->take_next_sample(&s, info);
    if (rc == RC(RETCODE_NO_DATA)) {
        return 0;
    }
    if (rc != RC(RETCODE_OK)) {
        return -1;
    }
    if (!info->valid_data) {
        *size = 0;
        *copied = 0;
        return 2;
    }
    *size = s.size;
    *copied = s.copied;
    return 1;
}

extern "C" int fdds_take(fdds_reader *r, uint8_t *buf, size_t cap, size_t *size, size_t *copied) {
    return take_from(r->r, &r->info, buf, cap, size, copied);
}

extern "C" int fdds_take_in_callback(void *reader, uint8_t *buf, size_t cap, size_t *size,
                                     size_t *copied) {
    SampleInfo info;
    return take_from(static_cast<DataReader *>(reader), &info, buf, cap, size, copied);
}

extern "C" int fdds_wait(fdds_reader *r, int64_t timeout_ns) {
    if (timeout_ns < 0) {
        timeout_ns = 0;
    }
    Duration d(static_cast<int32_t>(timeout_ns / 1000000000),
                                     static_cast<uint32_t>(timeout_ns % 1000000000));
    return r->r->wait_for_unread_message(d) ? 1 : 0;
}

extern "C" void fdds_reader_delete(fdds_reader *r) {
    if (!r) {
        return;
    }
    if (r->listener) {
        r->r->set_listener(nullptr);
        r->listener->close();
    }
    r->p->sub->delete_datareader(r->r);
    topic_release(r->p, r->topic);
    delete r;
}
