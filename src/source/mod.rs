//! Sources: the only code that touches `/dev` (ARCHITECTURE.md).

pub mod bus;
pub mod clock_quality;
pub mod modbus;
pub mod probe;
pub mod spread;
