//! System calls the tune crate needs (placeholder until the profiles issue lands).
