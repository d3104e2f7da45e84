//! Polls into sample blocks: the pure part of the poller.
//!
//! The poller numbers its poll slots `k = 0, 1, 2, ...` at the configured poll rate from one
//! anchor; slot `k` is at event time `anchor_ms + round(k * 1000 / rate_hz)`. [`BlockAssembler`]
//! collects the outcome of each slot for one register block and cuts them into records:
//!
//! - consecutive answered slots become one [`SamplesRecord`] per channel (sample `i` at
//!   `t0_ms + i * 1000 / rate_hz`, docs/contracts.md section 8), so the stamping stage sees real gaps;
//! - consecutive slots answered with the same device exception become one [`BadReadings`] per
//!   channel: readings of quality `bad`, values rather than transport errors;
//! - a slot without an answer (timeout, transport or frame error, a slot skipped while
//!   reconnecting or because a poll overran) ends the current run and leaves a gap;
//! - a run also ends at every multiple of `block_polls` slots, so records have a bounded length
//!   and arrive at a steady pace (e.g. one per channel and second).

use crate::event::Unit;
use crate::trace::SamplesRecord;

/// What the poller sends downstream.
#[derive(Debug, Clone, PartialEq)]
pub enum ModbusOutput {
    /// Answered polls of one channel.
    Samples(SamplesRecord),
    /// Polls of one channel the device answered with an exception: quality `bad`.
    Bad(BadReadings),
}

/// A run of polls of one channel, all answered with the same device exception.
#[derive(Debug, Clone, PartialEq)]
pub struct BadReadings {
    pub machine: String,
    pub sensor: String,
    /// Event time of the first poll of the run.
    pub t0_ms: i64,
    /// The poll rate: poll `i` of the run is at `t0_ms + i * 1000 / rate_hz`.
    pub rate_hz: f64,
    pub polls: u32,
    pub unit: Unit,
    pub axis: Option<String>,
    /// The Modbus exception code (1 illegal function, 2 illegal data address, ...).
    pub exception: u8,
}

/// The outcome of one poll slot of one register block.
#[derive(Debug, Clone, PartialEq)]
pub enum PollOutcome {
    /// Decoded values, one per channel in channel order.
    Values(Vec<f64>),
    /// The device answered with this exception code.
    Exception(u8),
    /// No usable answer.
    Missing,
}

/// The per-channel fields copied into every record.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelMeta {
    pub sensor: String,
    pub unit: Unit,
    pub axis: Option<String>,
}

#[derive(Debug)]
enum Run {
    None,
    Good { k0: u64, next: u64, data: Vec<Vec<f64>> },
    Bad { k0: u64, next: u64, code: u8 },
}

/// Cuts the poll outcomes of one register block into records; see the module documentation.
#[derive(Debug)]
pub struct BlockAssembler {
    machine: String,
    channels: Vec<ChannelMeta>,
    rate_hz: f64,
    anchor_ms: i64,
    block_polls: u64,
    run: Run,
}

impl BlockAssembler {
    /// `rate_hz` > 0 and finite; `block_polls` is raised to at least 1.
    pub fn new(
        machine: &str,
        channels: Vec<ChannelMeta>,
        rate_hz: f64,
        anchor_ms: i64,
        block_polls: u32,
    ) -> Self {
        BlockAssembler {
            machine: machine.to_owned(),
            channels,
            rate_hz,
            anchor_ms,
            block_polls: u64::from(block_polls.max(1)),
            run: Run::None,
        }
    }

    /// Event time of poll slot `k`.
    pub fn time_of(&self, k: u64) -> i64 {
        self.anchor_ms + (k as f64 * 1000.0 / self.rate_hz).round() as i64
    }

    /// Takes the outcome of slot `k` (slots must come in increasing order) and appends every
    /// record it completes to `out`.
    pub fn push(&mut self, k: u64, outcome: PollOutcome, out: &mut Vec<ModbusOutput>) {
        let continues = match (&self.run, &outcome) {
            (Run::Good { next, .. }, PollOutcome::Values(_)) => *next == k,
            (Run::Bad { next, code, .. }, PollOutcome::Exception(c)) => *next == k && code == c,
            _ => false,
        };
        if !continues {
            self.flush(out);
        }
        match outcome {
            PollOutcome::Missing => return,
            PollOutcome::Values(values) => match &mut self.run {
                Run::Good { next, data, .. } => {
                    for (column, v) in data.iter_mut().zip(values) {
                        column.push(v);
                    }
                    *next = k + 1;
                }
                _ => {
                    let mut data: Vec<Vec<f64>> = (0..self.channels.len())
                        .map(|_| Vec::with_capacity(self.block_polls as usize))
                        .collect();
                    for (column, v) in data.iter_mut().zip(values) {
                        column.push(v);
                    }
                    self.run = Run::Good { k0: k, next: k + 1, data };
                }
            },
            PollOutcome::Exception(code) => match &mut self.run {
                Run::Bad { next, .. } => *next = k + 1,
                _ => self.run = Run::Bad { k0: k, next: k + 1, code },
            },
        }
        if (k + 1).is_multiple_of(self.block_polls) {
            self.flush(out);
        }
    }

    /// Ends the current run, appending its records to `out` (at shutdown, or before a gap).
    pub fn flush(&mut self, out: &mut Vec<ModbusOutput>) {
        match std::mem::replace(&mut self.run, Run::None) {
            Run::None => {}
            Run::Good { k0, data, .. } => {
                let t0_ms = self.time_of(k0);
                for (meta, data) in self.channels.iter().zip(data) {
                    out.push(ModbusOutput::Samples(SamplesRecord {
                        machine: self.machine.clone(),
                        sensor: meta.sensor.clone(),
                        t0_ms,
                        rate_hz: self.rate_hz,
                        unit: meta.unit,
                        axis: meta.axis.clone(),
                        clock: None,
                        data,
                    }));
                }
            }
            Run::Bad { k0, next, code } => {
                let t0_ms = self.time_of(k0);
                let polls = u32::try_from(next - k0).unwrap_or(u32::MAX);
                for meta in &self.channels {
                    out.push(ModbusOutput::Bad(BadReadings {
                        machine: self.machine.clone(),
                        sensor: meta.sensor.clone(),
                        t0_ms,
                        rate_hz: self.rate_hz,
                        polls,
                        unit: meta.unit,
                        axis: meta.axis.clone(),
                        exception: code,
                    }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assembler(block_polls: u32) -> BlockAssembler {
        let meta = |s: &str| ChannelMeta { sensor: s.to_owned(), unit: Unit::G, axis: None };
        BlockAssembler::new("press-7", vec![meta("x"), meta("y")], 4.0, 1_000_000, block_polls)
    }

    fn samples(out: &[ModbusOutput]) -> Vec<(String, i64, Vec<f64>)> {
        out.iter()
            .filter_map(|o| match o {
                ModbusOutput::Samples(r) => Some((r.sensor.clone(), r.t0_ms, r.data.clone())),
                ModbusOutput::Bad(_) => None,
            })
            .collect()
    }

    #[test]
    fn full_blocks_give_one_record_per_channel_at_block_boundaries() {
        let mut a = assembler(4);
        let mut out = Vec::new();
        for k in 0..8u64 {
            a.push(k, PollOutcome::Values(vec![k as f64, -(k as f64)]), &mut out);
            if k == 2 {
                assert!(out.is_empty(), "nothing before the block is full");
            }
        }
        assert_eq!(
            samples(&out),
            vec![
                ("x".into(), 1_000_000, vec![0.0, 1.0, 2.0, 3.0]),
                ("y".into(), 1_000_000, vec![0.0, -1.0, -2.0, -3.0]),
                ("x".into(), 1_001_000, vec![4.0, 5.0, 6.0, 7.0]),
                ("y".into(), 1_001_000, vec![-4.0, -5.0, -6.0, -7.0]),
            ]
        );
        let ModbusOutput::Samples(r) = &out[0] else { panic!("samples expected") };
        assert_eq!((r.machine.as_str(), r.rate_hz, r.clock), ("press-7", 4.0, None));
    }

    #[test]
    fn a_missing_poll_splits_the_block_and_keeps_sample_times() {
        let mut a = assembler(4);
        let mut out = Vec::new();
        a.push(0, PollOutcome::Values(vec![1.0, 1.0]), &mut out);
        a.push(1, PollOutcome::Missing, &mut out);
        a.push(2, PollOutcome::Values(vec![3.0, 3.0]), &mut out);
        a.push(3, PollOutcome::Values(vec![4.0, 4.0]), &mut out);
        let got = samples(&out);
        assert_eq!(got[0], ("x".into(), 1_000_000, vec![1.0]));
        // Slot 2 is 500 ms after the anchor at 4 polls/s.
        assert_eq!(got[2], ("x".into(), 1_000_500, vec![3.0, 4.0]));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn skipped_slots_split_the_run_too() {
        let mut a = assembler(100);
        let mut out = Vec::new();
        a.push(0, PollOutcome::Values(vec![1.0, 1.0]), &mut out);
        a.push(5, PollOutcome::Values(vec![2.0, 2.0]), &mut out);
        a.flush(&mut out);
        let got = samples(&out);
        assert_eq!(
            got.iter().map(|g| g.1).collect::<Vec<_>>(),
            [1_000_000, 1_000_000, 1_001_250, 1_001_250]
        );
    }

    #[test]
    fn exceptions_become_bad_readings_per_channel_and_code() {
        let mut a = assembler(10);
        let mut out = Vec::new();
        a.push(0, PollOutcome::Exception(2), &mut out);
        a.push(1, PollOutcome::Exception(2), &mut out);
        a.push(2, PollOutcome::Exception(6), &mut out);
        a.push(3, PollOutcome::Values(vec![0.5, 0.25]), &mut out);
        a.flush(&mut out);
        let bad: Vec<(String, i64, u32, u8)> = out
            .iter()
            .filter_map(|o| match o {
                ModbusOutput::Bad(b) => Some((b.sensor.clone(), b.t0_ms, b.polls, b.exception)),
                ModbusOutput::Samples(_) => None,
            })
            .collect();
        assert_eq!(
            bad,
            vec![
                ("x".into(), 1_000_000, 2, 2),
                ("y".into(), 1_000_000, 2, 2),
                ("x".into(), 1_000_500, 1, 6),
                ("y".into(), 1_000_500, 1, 6),
            ]
        );
        assert_eq!(
            samples(&out),
            vec![("x".into(), 1_000_750, vec![0.5]), ("y".into(), 1_000_750, vec![0.25])]
        );
    }

    #[test]
    fn slot_times_round_to_milliseconds_from_one_anchor() {
        let a = BlockAssembler::new("m", vec![], 3.0, 0, 3);
        assert_eq!([a.time_of(0), a.time_of(1), a.time_of(2), a.time_of(3)], [0, 333, 667, 1000]);
    }
}
