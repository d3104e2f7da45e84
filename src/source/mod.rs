pub mod modbus;
