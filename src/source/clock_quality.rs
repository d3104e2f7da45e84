//! The kernel's clock-quality evidence: `adjtimex(2)` in read-only mode.
//!
//! `modes = 0` asks the kernel for its NTP state without changing anything (no privilege needed).
//! What linegate uses of it: the `STA_UNSYNC` status flag, the return value `TIME_ERROR`, and the
//! error bounds `maxerror` and `esterror` (µs). The model that turns these into the event `clock`
//! field is the pure `crate::stamp::clock`.

use crate::stamp::clock::KernelEvidence;

/// Where the bus loop gets kernel evidence from: `adjtimex` on a gateway, a script in tests.
pub trait KernelClock: Send {
    /// The kernel's current evidence, or `None` when it cannot be read.
    fn read(&mut self) -> Option<KernelEvidence>;
}

/// The real kernel, through `adjtimex`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Adjtimex;

impl KernelClock for Adjtimex {
    fn read(&mut self) -> Option<KernelEvidence> {
        read_adjtimex().ok()
    }
}

/// Reads the kernel's clock state with `adjtimex` in read-only mode (`modes = 0`).
///
/// An FFI call (`lib.rs` denies unsafe code; this function is allowed it, like `crate::memory`).
#[allow(unsafe_code)]
#[allow(clippy::useless_conversion)] // `c_long` is i64 on 64-bit targets, i32 on 32-bit ARM
pub fn read_adjtimex() -> std::io::Result<KernelEvidence> {
    // SAFETY: `timex` is a plain C struct of integers (and padding); all-zero bytes are a valid
    // value of it, and `modes = 0` is exactly the read-only request.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    tx.modes = 0;
    // SAFETY: `tx` is a valid, exclusively borrowed `timex` for the duration of the call; with
    // `modes = 0` the kernel only writes its state into it.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(KernelEvidence {
        unsynchronised: tx.status & libc::STA_UNSYNC != 0,
        time_error: state == libc::TIME_ERROR,
        maxerror_us: i64::from(tx.maxerror),
        esterror_us: i64::from(tx.esterror),
    })
}

/// The gateway clock's state from the kernel: synced while NTP disciplines it (the metrics'
/// `linegate_clock_state` and `status`).
pub fn kernel_clock_state() -> crate::event::ClockState {
    use crate::event::ClockState;
    match read_adjtimex() {
        Ok(k) if k.synchronised() => ClockState::Synced,
        Ok(_) => ClockState::Unsynced,
        Err(_) => ClockState::Unknown,
    }
}

/// The evidence in words for a technician (used by `linegate probe`).
pub fn describe(k: &KernelEvidence) -> String {
    if k.synchronised() {
        format!(
            "synchronised (NTP): error at most {} ms, estimated {} ms",
            ms(k.maxerror_us),
            ms(k.esterror_us)
        )
    } else {
        "NOT synchronised: the kernel has no time source (is chrony or systemd-timesyncd running \
         and reaching a server? `timedatectl` / `chronyc tracking`); timestamps follow an \
         unchecked clock"
            .to_owned()
    }
}

fn ms(us: i64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjtimex_reads_this_machines_clock_without_privilege() {
        let k = read_adjtimex().unwrap();
        // Whatever the machine's state, the bounds are non-negative and an unsynchronised kernel
        // says so in both places it can.
        assert!(k.maxerror_us >= 0 && k.esterror_us >= 0, "{k:?}");
        if k.unsynchronised {
            assert!(k.time_error, "STA_UNSYNC set but adjtimex did not return TIME_ERROR: {k:?}");
        }
        assert_eq!(Adjtimex.read().map(|e| e.unsynchronised), Some(k.unsynchronised));
    }

    #[test]
    fn description_names_the_bound_or_what_to_check() {
        let synced = KernelEvidence {
            unsynchronised: false,
            time_error: false,
            maxerror_us: 12_345,
            esterror_us: 600,
        };
        assert_eq!(
            describe(&synced),
            "synchronised (NTP): error at most 12.3 ms, estimated 0.6 ms"
        );
        let unsynced = KernelEvidence { unsynchronised: true, time_error: true, ..synced };
        assert!(describe(&unsynced).contains("NOT synchronised"));
        assert!(describe(&unsynced).contains("chronyc tracking"));
    }
}
