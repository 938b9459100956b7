//! Socket options for the UDP probe (placeholder until the UDP issue lands).
