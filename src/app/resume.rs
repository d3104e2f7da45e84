//! A start: the store opened (recovered when damaged), the decide stage restored from its
//! checkpoint, the start ledgered, and where each source resumes.
//!
//! A start on an existing store ledgers a `Restart` and resumes: the decide stage from its
//! checkpoint (journal records after it are decided again, exactly as before), each source right
//! after its last journaled record or its position kept beside the checkpoint (`n/source/`),
//! whichever is further.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Notify;

use super::{shutdown, AppError};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::decide::stage::DecideStage;
use crate::records::journal::Origin;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::store::{SharedStore, Store, StoreError, StoreOptions};
use crate::telemetry::Telemetry;

/// Where a start begins.
#[derive(Debug)]
pub(super) struct Resumed {
    /// The journal position this start begins at: records before it are read back from the
    /// journal first (catch-up).
    pub(super) catchup_end: u64,
    /// Per source, where it resumes.
    pub(super) offsets: BTreeMap<u16, u64>,
    /// The decide stage, restored from the checkpoint.
    pub(super) stage: DecideStage,
}

/// Source `i` of the configuration as the journal's origins name it.
pub(super) fn source_index(i: usize) -> u16 {
    u16::try_from(i).unwrap_or(Origin::RELEASED - 1)
}

/// Restores the decide stage from the store's checkpoint and, on a store that holds anything,
/// ledgers a `Restart` (and a `RuleChanged` when the rule changed since the checkpoint).
pub(super) fn resume(
    config: &Config,
    store: SharedStore,
    grew: Arc<Notify>,
    telemetry: Telemetry,
) -> Result<Resumed, AppError> {
    let stage = DecideStage::restore(config, store.clone(), grew, telemetry)?;
    let mut offsets = stage.offsets().clone();
    let mut s = store.write();
    let journal_next = s.next_journal_pos();
    // The checkpoint's offsets cover every record up to its position: only later ones can be ahead.
    let covered = s.checkpoint_pos();
    for i in 0..config.source.len() {
        let i = source_index(i);
        if let Some(o) = s.journal_last_offset(i, covered)? {
            let e = offsets.entry(i).or_insert(0);
            *e = (*e).max(o);
        }
    }
    if journal_next > 1 || s.next_ledger_seq() > 1 {
        let outbox_pending = s.outbox_records();
        let entry = LedgerEntry::Restart {
            checkpoint_pos: s.checkpoint_pos(),
            journal_next,
            outbox_pending,
        };
        let mut records = vec![LedgerRecord::new(SystemClock::new().now_ms(), entry)];
        for change in &stage.rule_changes {
            let (rule, from, to) = (change.rule.clone(), change.from.clone(), change.to.clone());
            tracing::warn!(%rule, %from, %to, "the rule changed since the checkpoint: the new rule decides from here on");
            let journal_pos = s.checkpoint_pos() + 1;
            let entry = LedgerEntry::RuleChanged { from, to, journal_pos, rule: Some(rule) };
            records.push(LedgerRecord::new(SystemClock::new().now_ms(), entry));
        }
        s.append_ledger(&records)?;
    }
    failpoint!("app::start::after_restart", crate::app::AppError);
    Ok(Resumed { catchup_end: journal_next, offsets, stage })
}

/// Opens the store, recovering from a damaged one (what can be read is salvaged into a fresh
/// store, the damaged one moved aside, a `Recovery` ledger record): the daemon keeps running
/// rather than crash-looping. A checkpoint the decide stage cannot restore is such damage too:
/// the store is recovered without it, and the decide stage re-derives its state.
pub(super) async fn open_store(
    config: &Config,
    opts: StoreOptions,
) -> Result<(Store, bool), AppError> {
    use crate::decide::stage::StageError;
    let path = config.store.path.clone();
    let opts = StoreOptions { dedup_page_check: Some(crate::rule::dedup::page_reads), ..opts };
    let now_ms = SystemClock::new().now_ms();
    let (store, recovered) = tokio::task::spawn_blocking(move || {
        shutdown::panics_caught(|| Store::open_or_recover(&path, opts, now_ms))
    })
    .await??;
    log_recovery(recovered.as_ref());
    let Err(StageError::Checkpoint(why)) = crate::decide::stage::check_checkpoint(config, &store)
    else {
        return Ok((store, recovered.is_some()));
    };
    let cause = StoreError::Corrupt {
        path: config.store.path.clone(),
        tree: "state",
        key: "c/".into(),
        what: format!("the checkpoint does not restore: {why}"),
    };
    let (store, recovered) = tokio::task::spawn_blocking(move || {
        shutdown::panics_caught(|| store.recover(&cause, now_ms))
    })
    .await??;
    log_recovery(Some(&recovered));
    Ok((store, true))
}

fn log_recovery(recovered: Option<&crate::store::Recovered>) {
    if let Some(r) = recovered {
        tracing::error!(
            what = %r.what,
            moved_to = %r.moved_to.display(),
            lost = %r.lost,
            "the store was damaged: moved aside, going on with what could be salvaged"
        );
    }
}
