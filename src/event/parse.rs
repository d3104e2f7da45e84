//! Event parsing and validation. Filled in by the parsing work.
