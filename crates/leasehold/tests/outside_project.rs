//! A project outside this workspace that depends only on the `leasehold` facade (with
//! the one store feature the README names) compiles and runs the README's quickstart
//! exactly as printed there. The project is built with the workspace's `Cargo.lock`
//! (same versions, `--offline`), in a target dir of its own under this crate's
//! `CARGO_TARGET_TMPDIR`, so later runs are incremental.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The text of the first fenced block tagged `lang` after `heading` in `markdown`.
fn block_after(markdown: &str, heading: &str, lang: &str) -> String {
    let from = markdown
        .find(heading)
        .unwrap_or_else(|| panic!("README has no {heading:?}"));
    let rest = &markdown[from..];
    let open = format!("```{lang}\n");
    let start = rest
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block after {heading:?}"))
        + open.len();
    let len = rest[start..]
        .find("```")
        .unwrap_or_else(|| panic!("unterminated ```{lang} block"));
    rest[start..start + len].to_string()
}

#[test]
fn readme_quickstart_compiles_and_runs_in_a_project_of_its_own() {
    let facade = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = facade.join("../..").canonicalize().expect("workspace root");
    let readme = std::fs::read_to_string(workspace.join("README.md")).expect("README.md");

    let deps = block_after(&readme, "## Quickstart", "toml");
    let code = block_after(&readme, "## Quickstart", "rust");
    assert!(
        deps.contains("leasehold = { version = \"0.1\""),
        "README's dependency line changed:\n{deps}"
    );
    // The published version requirement, pointed at this checkout instead.
    let deps = deps.replace(
        "leasehold = { version = \"0.1\"",
        &format!("leasehold = {{ path = {:?}", facade.display().to_string()),
    );
    let ours: Vec<&str> = deps
        .lines()
        .filter(|l| l.trim_start().starts_with("leasehold"))
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "the project depends on one crate of ours, the facade:\n{deps}"
    );

    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("outside-quickstart");
    let project = root.join("project");
    std::fs::create_dir_all(project.join("src")).expect("project dir");
    std::fs::write(
        project.join("Cargo.toml"),
        format!("[package]\nname = \"quickstart\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n{deps}\n[workspace]\n"),
    )
    .expect("Cargo.toml");
    std::fs::write(project.join("src/main.rs"), &code).expect("main.rs");
    std::fs::copy(workspace.join("Cargo.lock"), project.join("Cargo.lock")).expect("Cargo.lock");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env("CARGO_TARGET_DIR", root.join("target"))
        .current_dir(&project)
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the quickstart failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert_eq!(stdout.trim(), "paid with token 1", "stderr:\n{stderr}");
}
