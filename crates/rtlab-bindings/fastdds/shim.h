/* rtlab's C API over eProsima Fast DDS 2.9 (shim.cpp): one participant, writers and readers
 * of one hand-written keyless type whose samples are bytes serialized by the caller (the
 * 4-byte CDR encapsulation header first). Every call returns 0 (or a count) on success and
 * a negative value on failure; calls that can fail at setup write one line into `err`.
 * Nothing here prints (Fast DDS's log consumers are cleared). */
#ifndef RTLAB_FASTDDS_SHIM_H
#define RTLAB_FASTDDS_SHIM_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fdds_participant fdds_participant;
typedef struct fdds_writer fdds_writer;
typedef struct fdds_reader fdds_reader;

/* One initial (discovery) peer: an IPv4 address, and a port (0: the discovery ports of
 * participant ids 0..max_initial_peers-1 of the domain). */
typedef struct {
    const char *address;
    uint16_t port;
} fdds_peer;

typedef struct {
    uint32_t domain;
    /* IPv4 addresses UDPv4 may use (the interface whitelist); none: every interface. */
    const char *const *whitelist;
    size_t n_whitelist;
    /* Unicast discovery peers; none: Fast DDS's default (multicast) discovery. With peers,
     * no multicast locator is used at all. */
    const fdds_peer *peers;
    size_t n_peers;
    uint32_t max_initial_peers;
    /* Nonzero: also Fast DDS's shared-memory transport (as a default ROS 2 node has). */
    int shm;
    /* Its segment size in bytes (0: Fast DDS's default, 512 KiB). */
    uint32_t shm_segment;
    /* SO_RCVBUF / SO_SNDBUF asked for the UDP sockets (0: the system default). */
    uint32_t receive_buffer;
    uint32_t send_buffer;
} fdds_net;

typedef struct {
    int reliable;
    int keep_all;
    int32_t depth; /* keep-last depth */
    int transient_local;
} fdds_qos;

int fdds_participant_create(const fdds_net *net, fdds_participant **out, char *err, size_t err_len);
void fdds_participant_delete(fdds_participant *p);

int fdds_writer_create(fdds_participant *p, const char *topic, const char *type_name,
                       const fdds_qos *qos, fdds_writer **out, char *err, size_t err_len);
/* Write one serialized sample. 0: written; -1: refused by Fast DDS. */
int fdds_write(fdds_writer *w, const uint8_t *sample, size_t len);
int32_t fdds_writer_matched(fdds_writer *w);
/* Wait at most timeout_ns until every matched reliable reader acknowledged every sample
 * written (DataWriter::wait_for_acknowledgments). 1: they did; 0: timed out; -1: an error. */
int fdds_writer_wait_acked(fdds_writer *w, int64_t timeout_ns);
/* Wait at most drain_ns for acknowledgements (reliable), then delete. */
void fdds_writer_delete(fdds_writer *w, int64_t drain_ns);

int fdds_reader_create(fdds_participant *p, const char *topic, const char *type_name,
                       const fdds_qos *qos, fdds_reader **out, char *err, size_t err_len);
/* A reader's data-available callback: its argument, and the DataReader to take from
 * (fdds_take_in_callback), valid for the call. Runs in Fast DDS's receive thread. */
typedef void (*fdds_on_data)(void *arg, void *reader);
/* fdds_reader_create with a listener that calls cb(arg, reader) on data available; no call
 * runs once fdds_reader_delete returned. */
int fdds_reader_create_listened(fdds_participant *p, const char *topic, const char *type_name,
                                const fdds_qos *qos, fdds_on_data cb, void *arg,
                                fdds_reader **out, char *err, size_t err_len);
/* Take the next sample, copying at most `cap` of its bytes into `buf`. 1: a sample with
 * data (*size its serialized size, *copied what was copied); 2: a sample without data (a
 * dispose or unregister); 0: none; -1: an error. Never blocks. */
int fdds_take(fdds_reader *r, uint8_t *buf, size_t cap, size_t *size, size_t *copied);
/* fdds_take inside a data-available callback, from the reader it was given. */
int fdds_take_in_callback(void *reader, uint8_t *buf, size_t cap, size_t *size, size_t *copied);
/* Wait at most timeout_ns for an unread sample. 1: there is one; 0: timed out. */
int fdds_wait(fdds_reader *r, int64_t timeout_ns);
void fdds_reader_delete(fdds_reader *r);

#ifdef __cplusplus
}
#endif
#endif
