//! `--help` of the command and of each subcommand.

mod common;

use std::time::Duration;

use common::Store;

async fn help(store: &Store, args: &[&str]) -> String {
    let out = store.output(args, Duration::from_secs(20)).await;
    assert_eq!(common::code(&out), 0, "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_is_there_for_every_subcommand() {
    let store = Store::sqlite().await;
    let top = help(&store, &["--help"]).await;
    for word in [
        "run",
        "show",
        "release",
        "elect",
        "observe",
        "list",
        "stores",
        "--store",
        "LEASEHOLD_STORE",
        "Store URLs",
        "sqlite:PATH",
    ] {
        assert!(top.contains(word), "--help lacks {word}: {top}");
    }
    let run = help(&store, &["run", "--help"]).await;
    for word in [
        "--ttl",
        "--wait",
        "--timeout",
        "--grace",
        "LEASEHOLD_TOKEN",
        "Exit codes",
        "75",
        "76",
        "64",
        "69",
    ] {
        assert!(run.contains(word), "run --help lacks {word}: {run}");
    }
    assert_eq!(help(&store, &["help", "run"]).await, run);
    let show = help(&store, &["show", "--help"]).await;
    assert!(show.contains("--json") && show.contains("Exit codes"), "{show}");
    let release = help(&store, &["release", "--help"]).await;
    assert!(
        release.contains("--force") && release.contains("Exit codes"),
        "{release}"
    );
    // Its own 75: the record kept changing under it.
    assert!(release.contains("release --force: the"), "{release}");
    assert!(release.contains("kept changing"), "{release}");
    assert!(release.contains("74     cannot write to stdout"), "{release}");
    let elect = help(&store, &["elect", "--help"]).await;
    for word in ["--ttl", "--timeout", "--grace", "CMD", "Exit codes", "76"] {
        assert!(elect.contains(word), "elect --help lacks {word}: {elect}");
    }
    let check = help(&store, &["stores", "check", "--help"]).await;
    assert!(
        check.contains("--create") && check.contains("URL") && check.contains("Exit codes"),
        "{check}"
    );
    let list = help(&store, &["list", "--help"]).await;
    assert!(
        list.contains("--json") && list.contains("PREFIX") && list.contains("Exit codes"),
        "{list}"
    );
    let observe = help(&store, &["observe", "--help"]).await;
    for word in ["--json", "--count", "Exit codes"] {
        assert!(observe.contains(word), "observe --help lacks {word}: {observe}");
    }
    let version = help(&store, &["--version"]).await;
    assert!(version.starts_with("leasehold "), "{version}");
    // No subcommand: one line saying so, and the usage code; with no argument and no
    // store in the environment too (clap would print the whole help there).
    let out = store.output(&[], Duration::from_secs(20)).await;
    assert_eq!(common::code(&out), common::USAGE);
    common::assert_one_line(&out, common::USAGE);
    assert!(common::stderr(&out).contains("subcommand"), "{out:?}");
    for args in [&[][..], &["stores"][..]] {
        let mut bare = store.cmd(args);
        bare.env_remove("LEASEHOLD_STORE");
        let out = common::finish(bare.spawn().expect("start leasehold"), Duration::from_secs(20)).await;
        let line = common::assert_one_line(&out, common::USAGE);
        assert!(line.contains("a subcommand is needed"), "{args:?}: {line}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
}
