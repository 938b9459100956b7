//! rtlab-pubsub: placeholder until its issue lands.
