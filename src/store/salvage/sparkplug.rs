//! Step 4, the Sparkplug view's place (`crate::store`'s `sparkplug.rs`): what is well-formed is
//! copied as it is. Without it a recovered store would start the view again at cursor 0 (every
//! pending record sent again), lose what the view set aside (held values the host never gets,
//! though the JSON topics carried them) and use `bdSeq` 0 again.

use super::io::Batcher;
use super::{Copier, Old, Result, Store};
use crate::records::outbox::OutboxRecord;
use crate::store::sparkplug::{ASIDE, BD_SEQ, CURSOR, TABLE};

impl Copier<'_> {
    pub(super) fn sparkplug(&mut self, old: &Old<'_>, fresh: &Store) -> Result<()> {
        let mut out = Batcher::new(&fresh.state, fresh.path());
        for key in [CURSOR, BD_SEQ, TABLE] {
            match old.state.get(key) {
                Ok(None) => {}
                // The table is the view's own bytes: one that does not read starts anew there.
                Ok(Some(v)) if v.len() == 8 || key == TABLE => {
                    out.put(key, &v)?;
                    self.count(true, "sparkplug_place");
                }
                Ok(Some(_)) | Err(_) => self.count(false, "sparkplug_place"),
            }
        }
        for kv in old.state.scan_prefix(ASIDE) {
            match kv {
                Ok((k, v)) if k.len() == ASIDE.len() + 8 && OutboxRecord::decode(&v).is_ok() => {
                    out.put(&k, &v)?;
                    self.count(true, "sparkplug_set_aside");
                }
                Ok(_) => self.count(false, "sparkplug_set_aside"),
                Err(_) => {
                    self.count(false, "sparkplug_scan_stopped");
                    break;
                }
            }
        }
        out.flush()
    }
}
