//! What sled 0.34 alone does with the memory of a first-in-first-out tree, the shape of the
//! journal, the ledger and the outbox: keys appended at the end and removed at the front, `LIVE`
//! of them kept.
//!
//! `sled_fifo TOTAL LIVE [ROTATE]` writes TOTAL keys of 1 400 bytes (a journal page's size) in
//! order, removing each key once LIVE newer ones exist, flushing every 1 000, with a 16 MiB
//! cache; with ROTATE, the keys go to a new tree every ROTATE keys and a tree is dropped
//! (`Db::drop_tree`) once its last key is removed. Prints, eight times, the keys written, the
//! process's anonymous RSS and sled's size on disk. What it showed (decision 0069): the live
//! data is fixed, yet the RSS steps up by 5–10 MiB at moments that differ from run to run and
//! never comes back down, with one tree or with rotated ones alike.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::disallowed_methods)]

fn anon_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("RssAnon")).unwrap_or("RssAnon: 0 kB");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let (total, live, rotate) = match args[..] {
        [t, l] => (t, l, None),
        [t, l, r] if r > 0 => (t, l, Some(r)),
        _ => panic!("usage: sled_fifo TOTAL LIVE [ROTATE]"),
    };
    let dir = std::env::temp_dir().join(format!("sled-fifo-{}", std::process::id()));
    let db = sled::Config::new()
        .path(&dir)
        .cache_capacity(16 << 20)
        .flush_every_ms(None)
        .open()
        .unwrap();
    let name = |i: u64| format!("fifo-{}", rotate.map_or(0, |r| i / r));
    let value = vec![7u8; 1400];
    for i in 0..total {
        db.open_tree(name(i)).unwrap().insert(i.to_be_bytes(), value.as_slice()).unwrap();
        if let Some(old) = i.checked_sub(live) {
            db.open_tree(name(old)).unwrap().remove(old.to_be_bytes()).unwrap();
            if rotate.is_some_and(|r| (old + 1) % r == 0) {
                db.drop_tree(name(old)).unwrap();
            }
        }
        if i % 1000 == 999 {
            db.flush().unwrap();
        }
        if (i + 1) % (total / 8).max(1) == 0 {
            let disk = db.size_on_disk().unwrap();
            println!(
                "{} keys: anon {} KiB, sled {} MB on disk",
                i + 1,
                anon_kib(),
                disk / 1_000_000
            );
        }
    }
    drop(db);
    std::fs::remove_dir_all(dir).ok();
}
