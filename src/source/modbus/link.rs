//! One connection to a Modbus device: open it (TCP or serial), read one block with a timeout
//! around the call (tokio-modbus has none), and sort what went wrong into the cases the poller
//! and `probe` treat differently.
//!
//! A device exception (`Ok(Err(ExceptionCode))` in tokio-modbus 0.17) is an answer: the line works
//! and the device said no. Everything else that is not registers is a [`ReadError`], after which
//! the caller closes the connection: a late answer or stray bytes must not be taken for the next
//! poll's answer, and reopening a serial port flushes its buffers.

use std::io;
use std::time::Duration;

use tokio_modbus::client::{rtu, tcp, Context, Reader};
use tokio_modbus::Slave;
use tokio_serial::SerialPort as _;

use crate::config::modbus_map::{BlockMap, Function};
use crate::config::{ModbusSource, ModbusTransport, Parity, RtuPort};

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("no connection to {endpoint} within {timeout_ms} ms")]
    Timeout { endpoint: String, timeout_ms: u64 },
    #[error("cannot connect to {endpoint}: {source}")]
    Io {
        endpoint: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot open serial device {endpoint}: {description}")]
    Serial { endpoint: String, kind: tokio_serial::ErrorKind, description: String },
}

/// Why a read gave no registers and no exception.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No complete answer within the timeout.
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// The bytes that came back are not a valid answer to the request (CRC, framing, wrong
    /// header or function, wrong register count): garbage on the line or a confused peer.
    #[error("garbled answer: {0}")]
    Frame(String),
    /// The connection or the serial device failed (closed, reset, unplugged).
    #[error("connection failed: {0}")]
    Transport(io::Error),
}

/// Opens a connection to the device of `source`, within its timeout.
pub async fn connect(source: &ModbusSource) -> Result<Context, ConnectError> {
    let endpoint = source.endpoint();
    let slave = Slave(source.unit_id);
    match &source.transport {
        ModbusTransport::Tcp { host, port } => {
            let timeout = Duration::from_millis(source.timeout_ms);
            let stream = tokio::time::timeout(
                timeout,
                tokio::net::TcpStream::connect((host.as_str(), *port)),
            )
            .await
            .map_err(|_| ConnectError::Timeout {
                endpoint: endpoint.clone(),
                timeout_ms: source.timeout_ms,
            })?
            .map_err(|e| ConnectError::Io { endpoint: endpoint.clone(), source: e })?;
            // Requests are small and answered one at a time: send each at once.
            stream.set_nodelay(true).map_err(|e| ConnectError::Io { endpoint, source: e })?;
            Ok(tcp::attach_slave(stream, slave))
        }
        ModbusTransport::Rtu(port) => {
            let stream = open_serial(port).map_err(|e| ConnectError::Serial {
                endpoint,
                kind: e.kind,
                description: e.description,
            })?;
            Ok(rtu::attach_slave(stream, slave))
        }
    }
}

/// Opens the serial device by its configured path (a by-id path finds a replugged adapter again)
/// and drops whatever was buffered before.
fn open_serial(port: &RtuPort) -> Result<tokio_serial::SerialStream, tokio_serial::Error> {
    use tokio_serial::SerialPortBuilderExt as _;
    let parity = match port.parity {
        Parity::None => tokio_serial::Parity::None,
        Parity::Even => tokio_serial::Parity::Even,
        Parity::Odd => tokio_serial::Parity::Odd,
    };
    let data_bits = if port.data_bits == 7 {
        tokio_serial::DataBits::Seven
    } else {
        tokio_serial::DataBits::Eight
    };
    let stop_bits =
        if port.stop_bits == 2 { tokio_serial::StopBits::Two } else { tokio_serial::StopBits::One };
    let stream = tokio_serial::new(port.path.to_string_lossy(), port.baud)
        .parity(parity)
        .data_bits(data_bits)
        .stop_bits(stop_bits)
        .open_native_async()?;
    stream.clear(tokio_serial::ClearBuffer::All)?;
    Ok(stream)
}

/// Reads `block` once: its registers, or the device's exception code, or why neither came back.
pub async fn read_block(
    ctx: &mut Context,
    block: &BlockMap,
    timeout_ms: u64,
) -> Result<Result<Vec<u16>, u8>, ReadError> {
    let call = async {
        match block.function {
            Function::Holding => ctx.read_holding_registers(block.address, block.count).await,
            Function::Input => ctx.read_input_registers(block.address, block.count).await,
        }
    };
    let answer = tokio::time::timeout(Duration::from_millis(timeout_ms), call)
        .await
        .map_err(|_| ReadError::Timeout(timeout_ms))?;
    match answer {
        Ok(Ok(registers)) if registers.len() == usize::from(block.count) => Ok(Ok(registers)),
        Ok(Ok(registers)) => Err(ReadError::Frame(format!(
            "{} registers in the answer, {} asked for",
            registers.len(),
            block.count
        ))),
        Ok(Err(exception)) => Ok(Err(u8::from(exception))),
        Err(tokio_modbus::Error::Protocol(e)) => Err(ReadError::Frame(e.to_string())),
        Err(tokio_modbus::Error::Transport(e)) if e.kind() == io::ErrorKind::InvalidData => {
            Err(ReadError::Frame(e.to_string()))
        }
        Err(tokio_modbus::Error::Transport(e)) => Err(ReadError::Transport(e)),
    }
}
