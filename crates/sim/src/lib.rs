//! Trace-driven cache simulation: runs `ember-policy` decisions over `ember-trace` requests.
