//! Loads (`rtlab load`, a scenario's `loads`): stress-ng and iperf3 as the lab starts, bounds
//! and stops them.

pub use rtlab_load::{
    max_duration_for, Direction, LoadConfig, LoadReport, RunningLoad, TrafficConfig,
};
