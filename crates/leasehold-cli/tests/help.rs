//! `--help` of the command and of each subcommand, and the command lines it describes.

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

/// The description names every store of the URL list below it (MySQL too); each name
/// argument says the library's rule (ASCII only, at most 200 bytes); `--grace` says
/// the share of the TTL its check allows (44.9%, as its error message does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_names_every_store_the_name_rule_and_the_grace_limit() {
    let store = Store::sqlite().await;
    let top = help(&store, &["--help"]).await;
    let about = top.lines().next().unwrap_or_default();
    let stores = [
        ("sqlite:", "SQLite"),
        ("postgres://", "Postgres"),
        ("mysql://", "MySQL"),
        ("etcd://", "etcd"),
        ("zookeeper://", "ZooKeeper"),
        ("redis://", "Redis"),
        ("dynamodb://", "DynamoDB"),
        ("s3://", "S3"),
    ];
    // The URL list: its lines between the heading and the default.
    let urls: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Store URLs"))
        .skip(1)
        .take_while(|l| !l.starts_with("Default:"))
        .map(str::trim)
        .collect();
    assert_eq!(urls.len(), stores.len(), "a store this test does not know: {urls:?}");
    for (scheme, name) in stores {
        assert!(urls.iter().any(|u| u.starts_with(scheme)), "no {scheme} URL: {top}");
        assert!(about.contains(name), "the description lacks {name}: {about}");
    }
    for args in [
        &["run", "--help"][..],
        &["elect", "--help"],
        &["show", "--help"],
        &["release", "--help"],
        &["observe", "--help"],
    ] {
        let text = help(&store, args).await;
        assert!(
            text.contains("200 bytes of ASCII letters, digits and - _ . : / @ = #"),
            "{args:?}: {text}"
        );
    }
    for args in [&["run", "--help"][..], &["elect", "--help"]] {
        let text = help(&store, args).await;
        assert!(text.contains("At most 44.9% of the TTL"), "{args:?}: {text}");
        for signal in ["SIGUSR1", "SIGUSR2", "SIGALRM", "LEASEHOLD_HOLDER"] {
            assert!(text.contains(signal), "{args:?} lacks {signal}: {text}");
        }
    }
}

/// `run` and `elect` take a lease name starting with `-` where the name is due, their
/// options before or after it (`--ttl` is not taken for the name, nor the name for a
/// value); an unknown option there is still refused (`--` starts no name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_elect_take_a_name_starting_with_a_dash() {
    let store = Store::sqlite().await;
    let name = format!("-{}", store.name("dash"));
    // Prints the name it got, then the TTL the lease was taken with.
    let tell = "echo \"$LEASEHOLD_NAME\"; \"$LEASEHOLD_BIN\" show --json -- \"$LEASEHOLD_NAME\"";
    for (args, ttl_ms) in [
        (vec!["run", &name], 30_000),
        (vec!["run", "--ttl", "5s", &name], 5_000),
        (vec!["run", &name, "--ttl", "5s", "--grace", "1s"], 5_000),
        (vec!["elect", &name, "--ttl", "6s"], 6_000),
        (vec!["elect", "--timeout", "10s", "--ttl", "7s", &name], 7_000),
    ] {
        let mut all = args.clone();
        all.extend(["--", "sh", "-c", tell]);
        let out = store.output(&all, Duration::from_secs(20)).await;
        assert_eq!(common::code(&out), 0, "{all:?}: {out:?}");
        let stdout = String::from_utf8(out.stdout).expect("utf-8");
        let (got, shown) = stdout.split_once('\n').unwrap_or_else(|| panic!("{all:?}: {stdout}"));
        assert_eq!(got, name, "{all:?}");
        let shown: serde_json::Value = serde_json::from_str(shown).expect("show --json");
        assert_eq!(shown["ttl_ms"], ttl_ms, "{all:?}: {shown}");
    }
    for args in [
        &["run", "--bogus", "--", "true"][..],
        &["run", "--tll=5s", "--", "true"],
        &["elect", "--bogus", "--", "true"],
        // A long option with one dash is a typo too, not a name.
        &["run", "-wait", "--", "true"],
        &["elect", "-timeout", "--", "true"],
    ] {
        let out = store.output(args, Duration::from_secs(20)).await;
        let line = common::assert_one_line(&out, common::USAGE);
        assert!(line.contains("unknown option"), "{args:?}: {line}");
    }
}
