//! rtlab-report: placeholder until its issue lands.
