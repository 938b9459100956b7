//! rtlab-tune: placeholder until its issue lands.
