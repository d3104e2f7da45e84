//! Trace line parsing. Filled in by the parsing work.
