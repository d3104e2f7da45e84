//! Configuration (CONTRACTS section 9). Filled in by the config work.
