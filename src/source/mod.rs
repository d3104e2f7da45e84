//! Sources: the only code that touches `/dev` (docs/architecture.md).

pub mod bus;
pub mod clock_quality;
pub mod modbus;
pub mod probe;
pub mod spread;
