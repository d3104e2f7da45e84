//! How long a recovery's salvage takes on a large store (issue 19, item 2).
//!
//! `salvage_time DIR` damages one outbox record of the closed store in `DIR` (the tenth: bytes
//! that do not decode, written through sled, so the start-up check fails), then times
//! `Store::open_or_recover`, which moves the store aside and salvages what it holds into a fresh
//! one. Build the store first with `store_day DIR SECONDS MAX_BYTES` and a budget it never
//! reaches (nothing shed, nothing acknowledged: the whole backlog is salvaged). Prints one JSON
//! object: the store's size, the recovery's wall time, and what the salvage copied and lost. The
//! moved-aside copy (`DIR.corrupt-*`) shares the segment files with the new store (hard links):
//! delete it afterwards.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Instant;

use linegate::store::{Store, StoreOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 {
        eprintln!("usage: salvage_time DIR");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let size = Store::open(&dir, StoreOptions::default()).unwrap().disk_usage().unwrap();
    {
        let db = linegate::store::open_sled_directly(&dir).unwrap();
        let key = [&b"o/"[..], &10u64.to_be_bytes()].concat();
        db.open_tree("state").unwrap().insert(key, &b"\x01garbage"[..]).unwrap();
        db.flush().unwrap();
    }
    let t = Instant::now();
    let (store, recovered) = Store::open_or_recover(&dir, StoreOptions::default(), 0).unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let r = recovered.expect("the damaged record was found at start-up");
    let outbox = store.outbox_pending().count();
    drop(store);
    println!(
        "{{\"size_on_disk\":{size},\"recovery_ms\":{ms:.0},\"outbox_after\":{outbox},\
         \"copied\":{},\"unreadable\":{},\"moved_to\":{:?}}}",
        serde_json::to_string(&r.salvage.copied).unwrap(),
        serde_json::to_string(&r.salvage.unreadable).unwrap(),
        r.moved_to.display().to_string(),
    );
}
