//! Stamping and feature extraction. Filled in by the stamp work.
