//! rtlab-report: rtlab's rendering — stored runs as a terminal report and one self-contained
//! HTML file; a measuring command's summary on the terminal ([`summary`]); the statistics
//! table and the terminal histogram they share ([`render`]).
//!
//! Contract: pure functions from [`rtlab_core::run::Run`]s (or a run's document and
//! summary) to text. Depends on rtlab-core only: the CLI loads runs from the store and hands
//! them over, so a report never re-runs anything and never needs a probe. The HTML is one file that opens offline: no CDN, no
//! external JS, CSS or fonts; every plot is inline SVG generated here. Every case is shown,
//! failed and skipped ones with their error or reason; environment and warnings are on every
//! case. Where the runs hold the same pub/sub case through `ros2` and through the DDS its RMW
//! runs on, both reports show the "ROS 2 layer" rows ([`ros2_layer`]). Never prints: the
//! caller writes the text.

#![forbid(unsafe_code)]

pub mod compare;
pub mod cost;
pub mod dashboard;
pub mod evidence;
pub mod gates;
pub mod graph;
pub mod html;
pub mod junit;
pub mod ks;
pub mod model;
pub mod noise;
pub mod render;
pub mod ros2_layer;
pub mod summary;
pub mod svg;
pub mod table;
pub mod terminal;
pub mod trace;
pub mod verdict;

pub use html::render_html;
pub use terminal::render_terminal;
