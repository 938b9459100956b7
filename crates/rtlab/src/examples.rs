//! The EXAMPLES of each command's help and man page: command lines a person can paste (each
//! bounded in time; none changes the machine without saying so). tests/docs_flags.rs checks
//! every flag of them against the command, as it does the README's.

pub const TIMER: &str = "Examples:
  rtlab timer -D 10s                              # one thread, 1 ms, FIFO 80: wake-up latency
  rtlab timer -t 4 -p 80 -i 1ms -D 1m             # as cyclictest -t4 -p80 -i1000 -D1m
  rtlab timer --mode roscpp-oneshot -i 1ms --count 10000 --policy other   # S4's test on roscpp, normal priority
  rtlab timer --mode roscpp --roscpp-rt after-init -D 30s   # RT set after ros::init: what reaches roscpp's threads
  rtlab timer -D 30s --trace-on-spike 500us       # the kernel's trace of the first wake-up above 500 us";

pub const UDP: &str = "Examples:
  rtlab udp ping --pair --count 1000              # a reflector in a namespace pair, 1 ms periods (S1)
  rtlab udp reflect --bind 0.0.0.0:7400 -D 10m    # on the far host, then on this one:
  rtlab udp ping --to robot2:7400 --count 60000 --payload 500";

pub const NETNS: &str = "Examples:
  rtlab netns up                                  # two namespaces joined by veth (removed by: rtlab netns down)
  rtlab netns show";

pub const PUBSUB: &str = "Examples:
  rtlab pubsub --transport shm --count 1000       # one way through iceoryx2, 100 Hz, 64 B
  rtlab pubsub --transport cyclonedds --mode roundtrip --payload 64,4kib --rate 100hz,1khz
  rtlab pubsub --transport ros2 --mode roundtrip --count 600   # through rcl and its RMW
  rtlab pubsub --transport zenoh --subscribers 1-6 --count 500 # fan-out, one row per subscriber";

pub const LOAD: &str = "Examples:
  rtlab load cpu --workers 2 -D 30s               # stress-ng CPU workers, then stopped
  rtlab load traffic --rate 40mbit -D 30s         # iperf3 over loopback";

pub const TUNE: &str = "Examples:
  rtlab tune check                                # how far this machine is from a real-time setup
  rtlab tune apply rt-affinities --dry-run        # what the profile would change (nothing changed)
  rtlab tune apply rt-affinities --hold 10m       # applied, journaled, put back after 10 min or Ctrl-C
  rtlab tune show; rtlab tune restore             # what is applied; put it all back";

pub const RUN: &str = "Examples:
  rtlab run                                       # the presets, and what each measures
  rtlab run quick                                 # the main job: a few minutes, a verdict and what helps
  rtlab run s1-udp-linux --scale 0.01 --dry-run   # a study's cases and their length, nothing run
  rtlab run my.toml --gate 'timer/*:*:max<=1ms' --junit junit.xml   # exit 1 when a gate is broken";

pub const RUNS: &str = "Examples:
  rtlab runs
  rtlab runs --db postgres://lab@db.example/rtlab";

pub const REPORT: &str = "Examples:
  rtlab report                                    # the latest run: verdict, what helps, tables
  rtlab report 12 --html run-12.html              # one file that opens offline";

pub const COMPARE: &str = "Examples:
  rtlab compare 11 12                             # case by case; exit 1 on a regression
  rtlab compare --baseline --metric p99_9         # the latest run against the last good one";

pub const SERVE: &str = "Examples:
  rtlab serve                                     # http://127.0.0.1:8080 over results/rtlab.db
  rtlab serve --db postgres://lab@db.example/rtlab --listen 0.0.0.0:8080 --token SECRET";

pub const MONITOR: &str = "Examples:
  rtlab monitor --config /etc/rtlab/monitor.toml  # curl http://127.0.0.1:9464/metrics
  rtlab monitor --config monitor.toml --check     # is the file good?";

pub const EXPORT: &str = "Examples:
  rtlab export latest --format csv -o run.csv
  rtlab export 12 --format json -o -";

pub const PUSH: &str = "Examples:
  rtlab push --to postgres://lab@db.example/rtlab # every local run not yet there";

pub const CYCLIC: &str = "Examples:
  rtlab cyclic -i 1ms --work 200us -D 10s          # a 1 kHz loop doing 200 us of work
  rtlab cyclic -i 1ms --work 300us -t 2 -p 80 -D 1m";

pub const NOISE: &str = "Examples:
  rtlab noise -D 10s                              # every online CPU, gaps above 1 us
  rtlab noise --cpus 1 -D 1m --tracer osnoise      # the isolated CPU, with the kernel's own tracer";

pub const OBSERVE: &str = "Examples:
  rtlab observe                                   # the live ROS 2 / DDS graph of domain 0
  rtlab observe --topic /joint_states --rate 100hz -D 30s   # arrivals of a live topic";

pub const TRACE: &str = "Examples:
  rtlab trace -D 30s -- ros2 launch my_robot bringup.launch.py   # every process it starts
  rtlab trace --chain /scan,/filtered,/cmd_vel --deadline /scan,/cmd_vel=50ms -- ./start.sh
  rtlab trace --pid 4242 --pid 4243 -D 30s        # processes that run already (uprobes)";

pub const MAN: &str = "Examples:
  rtlab man > rtlab.1 && man ./rtlab.1";

pub const COMPLETIONS: &str = "Examples:
  rtlab completions bash > /etc/bash_completion.d/rtlab";
