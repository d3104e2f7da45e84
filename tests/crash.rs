//! Crash tests of `linegate run` (issue 3): the real binary on a trace source, killed with
//! SIGKILL at every named failpoint (`LINEGATE_KILL_AT=point:nth`, the `failpoints` feature) and
//! at random moments, restarted until a run ends by itself, then checked: `linegate reconcile`
//! passes, and against `linegate replay` of the same trace the accepted event ids are equal
//! (none lost, none ledgered twice), the alert records are equal as a set of
//! `(alert_id, revision, content)` (archive and ledger alike), and `export` of the history is
//! the trace, line for line (so `replay` of the export decides what the gateway decided).
//!
//! `LINEGATE_CRASH_KILLS=N` (default 50) sets how many kills at least; `LINEGATE_CRASH_SEED`
//! the seed of the random choices (printed).
#![cfg(feature = "failpoints")]

mod support;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use support::crashes::{
    check, config_head, count_and_seed, kill_pass, make_trace, reference, Rng, POINTS,
    WITH_FORWARDER,
};
use support::daemon::Daemon;
use support::DEADLINE;

fn config_text(dir: &Path, trace: &Path) -> String {
    format!(
        r#"{}
[store]
path = "{}"
commit_records = 200
commit_interval = "20ms"

[[source]]
kind = "trace"
path = "{}"
speed = 0.0
"#,
        config_head("gw-crash"),
        dir.join("db").display(),
        trace.display()
    )
}

/// How one run ended.
#[derive(Debug, PartialEq)]
enum End {
    Killed,
    Exited,
}

fn run(config: &Path, forward: bool, kill_at: Option<String>, kill_after_ms: Option<u64>) -> End {
    let mut args = vec!["--exit-at-end"];
    args.extend(if forward { &["--forward", "local-ack"][..] } else { &["--no-forward"] });
    let mut env = vec![("LINEGATE_LOG", "warn")];
    if let Some(k) = &kill_at {
        env.push(("LINEGATE_KILL_AT", k));
    }
    let mut d = Daemon::start(config, &args, &env);
    if let Some(ms) = kill_after_ms {
        // The kill's moment is the point of the test, not a synchronisation.
        std::thread::sleep(Duration::from_millis(ms));
        d.kill();
    }
    // Far more than a run takes: only a hang reaches it.
    let (status, _) = d.wait(DEADLINE * 5);
    match status.signal() {
        Some(9) => End::Killed,
        _ => {
            assert!(status.success(), "linegate run failed: {status:?}\n{}", d.log());
            End::Exited
        }
    }
}

#[test]
fn sigkill_at_every_failpoint_and_at_random_loses_and_doubles_nothing() {
    let (kills_wanted, seed) =
        count_and_seed("LINEGATE_CRASH_KILLS", 50, "LINEGATE_CRASH_SEED", "crash test");
    let mut rng = Rng(seed | 1);
    // tmpfs when there is one: a SIGKILL leaves the page cache intact, so what this test proves
    // (process-crash consistency) does not depend on the disk, and fsyncs there cost nothing.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(&trace, make_trace()).unwrap();
    let config = dir.path().join("replay.toml");
    std::fs::write(&config, config_text(&dir.path().join("unused"), &trace)).unwrap();
    let want = reference(&trace, &config, dir.path());
    assert!(want.0.len() > 4000 && want.1.len() > 10 && want.2 > 10, "the trace exercises little");
    let (mut kills, mut round, mut point_i) = (0usize, 0usize, 0usize);
    let mut killed_at = BTreeSet::new();
    while kills < kills_wanted || killed_at.len() < POINTS.len() {
        round += 1;
        let rdir = dir.path().join(format!("round{round}"));
        std::fs::create_dir_all(&rdir).unwrap();
        let config = rdir.join("config.toml");
        std::fs::write(&config, config_text(&rdir, &trace)).unwrap();
        let forward = round % 2 == 1;
        for cycle in 0.. {
            let killing = cycle < 25;
            let (kill_at, after) = if !killing {
                (None, None)
            } else if cycle % 3 == 2 {
                (None, Some(20 + rng.below(400)))
            } else {
                let mut p = POINTS[point_i % POINTS.len()];
                point_i += 1;
                if !forward && WITH_FORWARDER.contains(&p) {
                    p = POINTS[point_i % POINTS.len()];
                    point_i += 1;
                }
                // A start-up point passes once per process, an acknowledgement a few times a run.
                let nth = kill_pass(p, &mut rng);
                (Some((p, nth)), None)
            };
            let spec = kill_at.map(|(p, n)| format!("{p}:{n}"));
            match run(&config, forward, spec, after) {
                End::Killed => {
                    kills += 1;
                    if let Some((p, _)) = kill_at {
                        killed_at.insert(p);
                    }
                }
                End::Exited => break,
            }
        }
        check(&config, &want, round);
        let exported = support::cli(&["export"], &config);
        assert!(
            exported == std::fs::read_to_string(&trace).unwrap(),
            "round {round}: the export of the history is not the trace ({} lines)",
            exported.lines().count()
        );
        if !forward {
            // Nothing was acknowledged: the raw frames are still queued, in segment files.
            let raw = rdir.join("db").join(linegate::store::RAW_DIR);
            let segments = std::fs::read_dir(&raw).unwrap().count();
            assert!(segments > 0, "round {round}: no segment file in {}", raw.display());
        }
        // About 6 kills per round: the limit grows with LINEGATE_CRASH_KILLS.
        assert!(
            round < 30 + kills_wanted / 4,
            "too many rounds: kills {kills}, points hit {killed_at:?}"
        );
    }
    eprintln!("crash test: {kills} kills over {round} rounds, every failpoint hit");
}
