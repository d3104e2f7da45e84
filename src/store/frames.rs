//! Encoded frames of raw samples, beside their lines in the segment files (`segments.rs`).
//!
//! The decide stage encodes each block of raw samples once, as one frame of every sample
//! (`records::samples_codec::encode_block`), and writes it here before the outbox record that
//! names it ([`FrameRef`]) is applied: like a raw line, its bytes are written before the
//! reference and made durable by the commit before sled's are. A drain then reads and cuts these
//! bytes instead of parsing the journal line's JSON numbers again.
//!
//! A frame is a cache of its journal line, which stays the truth (history, `export`, salvage):
//! one is written only into the segment being written, never starting a segment; it is deleted
//! with its segment, by the same rule as lines (a segment none of whose own lines is referenced
//! any more), so a frame can outlive its use or, rarely, go before it; a frame that is missing or
//! fails its checksum is read from the line again by the caller.

use super::segments::SegmentRef;
use super::{Result, Store};
use crate::records::outbox::FrameRef;

impl Store {
    /// Writes `bytes`, a block's encoded frame, beside the lines of the segment being written;
    /// `None` when no segment is being written. Durable at the next [`Store::commit`].
    pub fn append_frame(&self, bytes: &[u8]) -> Result<Option<FrameRef>> {
        self.usable()?;
        let r = self.segments.append_beside(bytes).map_err(|e| self.segment_err(e));
        let r = self.poison_on_error(r)?;
        Ok(r.map(|r| FrameRef { segment: r.id, offset: r.offset, len: r.len, sum: r.sum }))
    }

    /// The bytes `frame` names, checked against their checksum; the error says what is wrong
    /// (the segment is gone, too short, or the bytes changed).
    pub fn read_frame(&self, frame: &FrameRef) -> std::result::Result<Vec<u8>, String> {
        let r =
            SegmentRef { id: frame.segment, offset: frame.offset, len: frame.len, sum: frame.sum };
        self.segments.read(&r)
    }
}
