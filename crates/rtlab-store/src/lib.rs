//! rtlab-store: placeholder until its issue lands.
