//! The pure decision core. Filled in by the rule work.
