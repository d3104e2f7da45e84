//! SPI mock transactions shared by the driver and bus-loop benches.

use embedded_hal_mock::eh1::spi::Transaction as SpiTx;
use linegate::driver::adxl345::FIFO_POP_GAP_NS;

/// One register read as the driver frames it: the 5 µs FIFO gap first when `delay`, the command
/// byte, then `response`.
pub fn spi_read(delay: bool, cmd: u8, response: Vec<u8>, out: &mut Vec<SpiTx<u8>>) {
    out.push(SpiTx::transaction_start());
    if delay {
        out.push(SpiTx::delay(FIFO_POP_GAP_NS));
    }
    out.push(SpiTx::write_vec(vec![cmd]));
    out.push(SpiTx::read_vec(response));
    out.push(SpiTx::transaction_end());
}
