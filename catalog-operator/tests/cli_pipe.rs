//! The offline commands end quietly when the reader of their output goes away,
//! as in `catalog-operator render DIR | head`: no panic, no error, and the exit
//! code the command would have had anyway.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

fn corpus_dir() -> PathBuf {
    let dir = match std::env::var_os("OLM_RS_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    };
    assert!(
        dir.is_dir(),
        "the corpus of real bundles is missing at {}: check out shared/ beside the repository \
         or set OLM_RS_CORPUS to its corpus directory",
        dir.display()
    );
    dir
}

/// A package of the corpus whose rendered catalog (over 1 MiB) is far larger
/// than a pipe holds, and whose rendering warns about its default channel.
fn hive_operator() -> PathBuf {
    corpus_dir().join("bundles/hive-operator")
}

/// How the reader treats the command's output.
#[derive(Debug, Clone, Copy)]
enum Reader {
    /// Reads the first line, then closes the pipe (`| head -1`).
    FirstLine,
    /// Closes the pipe before the command writes anything.
    None,
}

/// Runs catalog-operator with `args`, its stdout read as `reader` says, and
/// returns the first line read, the exit code and what it wrote to stderr.
fn run_into_closed_pipe(args: &[&str], reader: Reader) -> (String, Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_catalog-operator"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start catalog-operator");
    let stdout = child.stdout.take().expect("a piped stdout");
    let mut first = String::new();
    match reader {
        Reader::FirstLine => {
            BufReader::new(stdout)
                .read_line(&mut first)
                .expect("read the first line");
        }
        Reader::None => drop(stdout),
    }
    let output = child.wait_with_output().expect("wait for catalog-operator");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (first, output.status.code(), stderr)
}

fn assert_quiet(command: &str, stderr: &str) {
    for noise in ["panicked", "Broken pipe", "error:"] {
        assert!(
            !stderr.contains(noise),
            "{command} into a closed pipe writes no {noise:?} to stderr; it wrote:\n{stderr}"
        );
    }
}

#[test]
fn render_ends_quietly_when_the_reader_leaves_after_one_line() {
    let dir = hive_operator();
    let (first, code, stderr) = run_into_closed_pipe(
        &["render", dir.to_str().expect("a UTF-8 path")],
        Reader::FirstLine,
    );
    assert!(first.starts_with('{'), "render writes JSON: {first:?}");
    assert_eq!(code, Some(0), "render exits 0; stderr:\n{stderr}");
    assert_quiet("render", &stderr);
    assert!(
        stderr.contains("warning: default channel"),
        "the warnings still go to stderr:\n{stderr}"
    );
}

#[test]
fn every_printing_command_ends_quietly_when_nobody_reads() {
    let dir = hive_operator();
    let dir = dir.to_str().expect("a UTF-8 path");
    let catalog = format!("--catalog=corpus={dir}");
    for args in [
        vec!["render", dir],
        vec!["validate", dir],
        vec!["resolve", &catalog, "hive-operator"],
        vec!["resolve", &catalog, "--output=json", "hive-operator"],
    ] {
        let command = args.join(" ");
        let (_, code, stderr) = run_into_closed_pipe(&args, Reader::None);
        assert_eq!(code, Some(0), "`{command}` exits 0; stderr:\n{stderr}");
        assert_quiet(&command, &stderr);
    }
}

#[test]
fn validate_keeps_its_exit_code_and_summary_when_nobody_reads() {
    let dir = hive_operator();
    let (_, code, stderr) =
        run_into_closed_pipe(&["validate", dir.to_str().expect("a UTF-8 path")], Reader::None);
    assert_eq!(code, Some(0), "no errors, so exit 0; stderr:\n{stderr}");
    assert_quiet("validate", &stderr);
    assert!(
        stderr.contains("0 errors, 2 warnings"),
        "the summary, counting the two warnings of rendering, still goes to stderr:\n{stderr}"
    );
}
