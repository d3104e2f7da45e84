//! `scripts/check-commits` (run first by `.ci/run`) on a throwaway repository: it names every
//! commit after the base whose subject is over 72 characters or that has no body, with its hash
//! and what is wrong, and exits 1; it passes commits that keep the rule, skips merge commits,
//! and refuses a base the repository does not have.

mod support;

use std::path::Path;
use std::process::{Command, Output};

/// `git ARGS` in `repo`, isolated from the machine's configuration: its standard output.
fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.org"])
        .args(["-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(repo)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A commit with `message` (and a file, so it is never empty): its full hash.
fn commit(repo: &Path, message: &str) -> String {
    let n = git(repo, &["rev-list", "--all", "--count"]);
    std::fs::write(repo.join(format!("file{n}")), message).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", message]);
    git(repo, &["rev-parse", "HEAD"])
}

fn check(repo: &Path, base: &str) -> Output {
    Command::new(support::root().join("scripts/check-commits"))
        .arg(base)
        .current_dir(repo)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("scripts/check-commits runs")
}

#[test]
fn offenders_are_named_with_their_hash_and_fail_the_check() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    git(repo, &["init", "-q"]);
    let base = commit(repo, "history: anything goes before the base");
    let long = "store: a subject that goes on and on well past the limit of seventy-two chars";
    assert_eq!(long.chars().count(), 77);
    let bad = commit(repo, long);
    let no_blank = commit(repo, "rule: a short subject\nthen text where the blank line should be");
    let good = commit(repo, "golden: a good subject\n\nAnd a body that says why.");
    // 72 characters exactly, counted as characters (the dash is three bytes).
    let edge = format!("docs: é—{}", "x".repeat(64));
    assert_eq!(edge.chars().count(), 72);
    let at_limit = commit(repo, &format!("{edge}\n\nWhy."));

    let out = check(repo, &base);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "{} subject is 77 characters (at most 72); no body (a blank line, then why): {long}",
                &bad[..12]
            ),
            format!(
                "{} no blank line after the subject: rule: a short subject",
                &no_blank[..12]
            ),
        ],
        "{stdout}"
    );
    assert!(!stdout.contains(&good[..12]) && !stdout.contains(&at_limit[..12]), "{stdout}");
    assert!(stderr.contains("2 of 4 commits after"), "{stderr}");
}

#[test]
fn good_commits_and_merges_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    git(repo, &["init", "-q"]);
    let base =
        commit(repo, "a base without a body, and a subject far longer than seventy-two chars");
    git(repo, &["checkout", "-q", "-b", "topic"]);
    commit(repo, "topic: one change\n\nWhy it is needed.");
    git(repo, &["checkout", "-q", "main"]);
    commit(repo, "main: another change\n\nWhy that one is needed.");
    git(repo, &["merge", "-q", "--no-edit", "topic"]);
    assert!(git(repo, &["log", "-1", "--format=%B"]).starts_with("Merge branch 'topic'"));

    let out = check(repo, &base);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("2 commits after"), "{stdout}");

    let missing = check(repo, "0123456789abcdef0123456789abcdef01234567");
    let stderr = String::from_utf8(missing.stderr).unwrap();
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not a commit of this repository"), "{stderr}");
}
