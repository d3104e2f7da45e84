//! Modbus RTU and TCP sources: poll a configured register map and yield sample blocks.
pub mod block;
pub mod map;
