//! Event schema 2 and its upcast. Filled in by the parsing work.
