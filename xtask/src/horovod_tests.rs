//! `cargo xtask horovod-tests`: Horovod's own test files (PyTorch, TensorFlow, TensorFlow 2
//! Keras) and two of its PyTorch examples, run unmodified against this tree's `hvd` by the
//! suite's runner (`run.sh`: each file whole in one 2-rank job as Horovod's CI runs it,
//! every test in a job of its own, and the examples), judged test by test. Anything that
//! is not passed, or skipped or failed for a reason listed here, fails the command.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::python;
use crate::workspace_root;

mod junit;
mod verdict;

pub(crate) use verdict::excused_failures;
use verdict::{Kind, Outcome, Verdict, judge, timing_race};

/// The variable that says where the suite is, when it is not beside the repository.
const SUITE_VAR: &str = "HVD_HOROVOD_TESTS";

/// What the runner prints for each example when it runs, and the log it writes under
/// `examples/`.
const EXAMPLES: [(&str, &str); 5] = [
    ("synthetic benchmark plain", "synthetic.log"),
    (
        "synthetic benchmark --fp16-allreduce",
        "synthetic__fp16_allreduce.log",
    ),
    (
        "synthetic benchmark --use-adasum",
        "synthetic__use_adasum.log",
    ),
    ("mnist (synthetic files)", "mnist.log"),
    ("mnist through horovod.run (--num-proc 2)", "mnist_run.log"),
];

/// One of Horovod's test files (in `upstream/test/parallel`), under the Keras its code is
/// written for: `keras2` runs it under tf_keras (`TF_USE_LEGACY_KERAS=1`), as TensorFlow
/// picks Keras 2, else under TensorFlow's default, Keras 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TestFile {
    /// What `--files` calls it, and its results' folder.
    name: &'static str,
    file: &'static str,
    keras2: bool,
}

const FILES: [TestFile; 4] = [
    TestFile {
        name: "torch",
        file: "test_torch.py",
        keras2: false,
    },
    TestFile {
        name: "tensorflow",
        file: "test_tensorflow.py",
        keras2: false,
    },
    TestFile {
        name: "tensorflow-tf_keras",
        file: "test_tensorflow.py",
        keras2: true,
    },
    // Written for Keras 2 (`lr=`, `keras.optimizers.legacy`, `opt.variables()`).
    TestFile {
        name: "tensorflow2_keras-tf_keras",
        file: "test_tensorflow2_keras.py",
        keras2: true,
    },
];

/// How many of a failed example's last log lines are shown, so that CI's output says why.
const LOG_TAIL_LINES: usize = 25;

/// Which parts of the suite to run: `run.sh`'s own modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Whole,
    Isolated,
    Examples,
}

impl Part {
    fn runner_mode(self) -> &'static str {
        match self {
            Part::Whole => "whole",
            Part::Isolated => "iso",
            Part::Examples => "examples",
        }
    }
}

#[derive(Debug)]
struct Options {
    suite: Option<PathBuf>,
    parts: Vec<Part>,
    files: Vec<TestFile>,
    only: Option<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            suite: None,
            parts: vec![Part::Whole, Part::Isolated, Part::Examples],
            files: FILES.to_vec(),
            only: None,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("horovod-tests: {name} needs a value"))
            };
            match arg.as_str() {
                "--suite" => options.suite = Some(PathBuf::from(value("--suite")?)),
                "--only" => options.only = Some(value("--only")?),
                "--parts" => {
                    options.parts = value("--parts")?
                        .split(',')
                        .map(|p| match p.trim() {
                            "whole" => Ok(Part::Whole),
                            "iso" => Ok(Part::Isolated),
                            "examples" => Ok(Part::Examples),
                            other => Err(format!(
                                "horovod-tests: --parts takes whole, iso and examples \
                                 (comma-separated), got {other:?}"
                            )),
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--files" => {
                    options.files = value("--files")?
                        .split(',')
                        .map(|f| {
                            FILES.iter().copied().find(|t| t.name == f.trim()).ok_or_else(|| {
                                let names: Vec<&str> = FILES.iter().map(|t| t.name).collect();
                                format!(
                                    "horovod-tests: --files takes {} (comma-separated), got {f:?}",
                                    names.join(", ")
                                )
                            })
                        })
                        .collect::<Result<_, _>>()?;
                }
                other => return Err(format!("horovod-tests: unknown option {other:?}")),
            }
        }
        Ok(options)
    }
}

/// The suite: `--suite`, else `HVD_HOROVOD_TESTS`, else `../shared/horovod-tests` beside
/// the repository; an error saying where it looked when it is not there.
pub(crate) fn locate(given: Option<PathBuf>, root: &Path) -> Result<PathBuf, String> {
    let (dir, from) = match (given, std::env::var_os(SUITE_VAR)) {
        (Some(dir), _) => (dir, "--suite".to_string()),
        (None, Some(dir)) => (PathBuf::from(dir), SUITE_VAR.to_string()),
        (None, None) => (
            root.join("../shared/horovod-tests"),
            "the default, beside the repository".to_string(),
        ),
    };
    if dir.join("run.sh").is_file() {
        return Ok(dir);
    }
    Err(format!(
        "Horovod's test suite is not at {} ({from}): no run.sh there. Pass --suite DIR or \
         set {SUITE_VAR} to the directory holding run.sh, upstream/ and shim/",
        dir.display()
    ))
}

/// An error unless the suite at `suite` can run `files`: each file is there, and, for
/// any but `test_torch.py`, its `run.sh` takes the file to run (`FILE`). An older copy of
/// the suite has PyTorch's file alone and a runner that would run it whatever was asked.
fn check_files(suite: &Path, files: &[TestFile]) -> Result<(), String> {
    let runner = std::fs::read_to_string(suite.join("run.sh"))
        .map_err(|e| format!("{}: {e}", suite.join("run.sh").display()))?;
    for file in files {
        let path = suite.join("upstream/test/parallel").join(file.file);
        if !path.is_file() {
            return Err(format!(
                "horovod-tests: the suite at {} has no {} (an older copy, with PyTorch's file \
                 only?); --files {} needs it",
                suite.display(),
                path.display(),
                file.name
            ));
        }
        if file.file != "test_torch.py" && !runner.contains("FILE") {
            return Err(format!(
                "horovod-tests: {} does not take FILE (an older runner, which runs \
                 test_torch.py whatever is asked); --files {} needs a newer suite",
                suite.join("run.sh").display(),
                file.name
            ));
        }
    }
    Ok(())
}

/// Runs `run.sh <mode>`, showing its output as it comes; returns the lines it printed.
fn run_part(
    suite: &Path,
    part: Part,
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<Vec<String>, String> {
    let mut command = Command::new(suite.join("run.sh"));
    command.arg(part.runner_mode()).stdout(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", suite.join("run.sh").display()))?;
    let mut lines = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            lines.push(line);
        }
    }
    let status = child.wait().map_err(|e| format!("run.sh: {e}"))?;
    // run.sh exits non-zero only when it cannot run at all (no venv, no hvdrun).
    if !status.success() {
        return Err(format!(
            "run.sh {} failed to run ({status})",
            part.runner_mode()
        ));
    }
    Ok(lines)
}

/// The examples' verdicts from the runner's `<example>: rc=N` lines.
fn examples(lines: &[String]) -> Vec<(String, Verdict)> {
    EXAMPLES
        .iter()
        .map(|(label, _)| {
            let rc = lines
                .iter()
                .rev()
                .find_map(|l| l.strip_prefix(&format!("{label}: rc=")));
            let verdict = match rc {
                Some("0") => Verdict::Passed,
                Some(code) => Verdict::Unexpected(format!("exited with code {code}")),
                None => Verdict::Unexpected("did not run".into()),
            };
            (label.to_string(), verdict)
        })
        .collect()
}

/// A test's name, outcome and verdict.
type Judged = (String, Outcome, Verdict);

/// The tests of one run (`whole` or `iso`) of `file` with each one's verdict.
fn judged_run(results: &Path, part: Part, file: TestFile) -> Vec<Judged> {
    let outcomes = match part {
        Part::Whole => junit::whole(&results.join("whole")),
        _ => junit::isolated(&results.join("iso")),
    };
    outcomes
        .into_iter()
        .map(|(test, outcome)| {
            let verdict = judge(file.name, &test, &outcome);
            (test, outcome, verdict)
        })
        .collect()
}

/// Runs each test whose failure is a listed timing race again, alone (results under
/// `out/again/<test>`): it passes if it passes then. Returns the verdicts and a line
/// for each test run again.
fn rerun_races(
    suite: &Path,
    env: &[(&str, &std::ffi::OsStr)],
    out: &Path,
    file: TestFile,
    mut judged: Vec<Judged>,
) -> Result<(Vec<Judged>, Vec<String>), String> {
    let mut lines = Vec::new();
    for (test, outcome, verdict) in &mut judged {
        let Verdict::Unexpected(_) = verdict else {
            continue;
        };
        let Some(why) = timing_race(test, outcome) else {
            continue;
        };
        println!("horovod-tests: {test} {outcome}; running it again alone ({why})");
        let again = out.join("again").join(test.as_str());
        let mut env = env.to_vec();
        env.push(("RESULTS", again.as_os_str()));
        env.push(("ONLY", std::ffi::OsStr::new(test.as_str())));
        run_part(suite, Part::Isolated, &env)?;
        let rerun = judged_run(&again, Part::Isolated, file)
            .into_iter()
            .find_map(|(name, rerun, _)| (name == *test).then_some(rerun));
        match rerun {
            Some(Outcome::Same(Kind::Passed, _)) => {
                lines.push(format!(
                    "      {test}: {outcome}, then passed when run again alone: {why}"
                ));
                *verdict = Verdict::Passed;
            }
            Some(rerun) => lines.push(format!("      {test}: {outcome}, and again alone: {rerun}")),
            None => lines.push(format!(
                "      {test}: {outcome}, and no result again alone"
            )),
        }
    }
    Ok((judged, lines))
}

/// Prints the end of a failed example's log, where its traceback is.
fn show_log_tail(results: &Path, label: &str) {
    let Some((_, log)) = EXAMPLES.iter().find(|(l, _)| *l == label) else {
        return;
    };
    let path = results.join("examples").join(log);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            println!("horovod-tests: the end of {}:", path.display());
            for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
                println!("    {line}");
            }
        }
        Err(e) => println!("horovod-tests: no log at {}: {e}", path.display()),
    }
}

fn counts(judged: &[Judged]) -> String {
    let passed = judged.iter().filter(|j| j.2 == Verdict::Passed).count();
    let excused = judged
        .iter()
        .filter(|j| matches!(j.2, Verdict::Excused(_)))
        .count();
    let unexpected = judged.len() - passed - excused;
    format!(
        "{} tests: {passed} passed, {excused} skipped or failed for a listed reason, \
         {unexpected} unexpected",
        judged.len()
    )
}

pub fn run(args: &[String]) -> Result<(), String> {
    let options = Options::parse(args)?;
    let root = workspace_root();
    let suite = locate(options.suite.clone(), &root)?;
    check_files(&suite, &options.files)?;
    let venv = python::venv();
    python::ready(&venv).map_err(|why| {
        format!(
            "horovod-tests: {why}; make it with: {} (then set HVD_VENV if it is elsewhere)",
            python::install_hint(&venv)
        )
    })?;
    println!(
        "horovod-tests: suite {}, environment {}",
        suite.display(),
        venv.display()
    );
    if options.parts.contains(&Part::Examples) {
        python::ensure_torchvision(&venv)?;
    }
    let path = python::install_wheel(&root, &venv)?;
    let results = root.join("target/horovod-tests");
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&results).map_err(|e| format!("{}: {e}", results.display()))?;
    let mut env: Vec<(&str, &std::ffi::OsStr)> =
        vec![("HVD_VENV", venv.as_os_str()), ("PATH", path.as_os_str())];
    if let Some(only) = &options.only {
        env.push(("ONLY", std::ffi::OsStr::new(only)));
    }

    let mut report = Vec::new();
    let mut unexpected = Vec::new();
    for &part in &options.parts {
        // The examples run once; the whole and isolated runs once per test file.
        let runs: Vec<Option<TestFile>> = match part {
            Part::Examples => vec![None],
            _ => options.files.iter().copied().map(Some).collect(),
        };
        for file in runs {
            let out = file.map_or_else(|| results.clone(), |f| results.join(f.name));
            let mut env = env.clone();
            env.push(("RESULTS", out.as_os_str()));
            if let Some(f) = file {
                env.push(("FILE", std::ffi::OsStr::new(f.file)));
                env.push((
                    "KERAS",
                    std::ffi::OsStr::new(if f.keras2 { "2" } else { "" }),
                ));
            }
            let label = match file {
                Some(f) => format!("{} {}", part.runner_mode(), f.name),
                None => part.runner_mode().to_string(),
            };
            let started = Instant::now();
            let lines = run_part(&suite, part, &env)?;
            let took = started.elapsed().as_secs();
            let judged = match file {
                None => examples(&lines)
                    .into_iter()
                    .map(|(label, v)| (label, Outcome::passed(), v))
                    .collect(),
                Some(f) => judged_run(&out, part, f),
            };
            let (judged, reruns) = match file {
                Some(f) => rerun_races(&suite, &env, &out, f, judged)?,
                None => (judged, Vec::new()),
            };
            if judged.is_empty() {
                unexpected.push(format!("{label}: no results at all"));
            }
            for (test, outcome, verdict) in &judged {
                if let Verdict::Unexpected(why) = verdict {
                    unexpected.push(format!("{label} {test}: {why} ({outcome})"));
                    if part == Part::Examples {
                        show_log_tail(&results, test);
                    }
                }
            }
            report.push(format!("  {label:<32} {took:>4}s  {}", counts(&judged)));
            report.extend(reruns);
            for (test, _, verdict) in &judged {
                if let Verdict::Excused(why) = verdict {
                    report.push(format!("      {test}: {why}"));
                }
            }
        }
    }
    println!("horovod-tests: results in {}", results.display());
    for line in &report {
        println!("{line}");
    }
    if unexpected.is_empty() {
        println!("horovod-tests: ok");
        return Ok(());
    }
    for line in &unexpected {
        println!("  UNEXPECTED {line}");
    }
    Err(format!(
        "horovod-tests: {} unexpected result(s); logs in {}",
        unexpected.len(),
        results.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_without_the_file_or_a_runner_that_takes_it_is_refused() {
        let suite = std::env::temp_dir().join(format!("hvd-suite-check-{}", std::process::id()));
        let parallel = suite.join("upstream/test/parallel");
        std::fs::create_dir_all(&parallel).unwrap();
        std::fs::write(
            suite.join("run.sh"),
            "TEST=$UP/test/parallel/test_torch.py\n",
        )
        .unwrap();
        std::fs::write(parallel.join("test_torch.py"), "").unwrap();
        let tensorflow = FILES[1];
        assert!(check_files(&suite, &FILES[..1]).is_ok());
        let err = check_files(&suite, &[tensorflow]).unwrap_err();
        assert!(
            err.contains("has no") && err.contains("test_tensorflow.py"),
            "{err}"
        );
        std::fs::write(parallel.join("test_tensorflow.py"), "").unwrap();
        let err = check_files(&suite, &[tensorflow]).unwrap_err();
        assert!(err.contains("does not take FILE"), "{err}");
        std::fs::write(suite.join("run.sh"), "TEST=$UP/test/parallel/${FILE}\n").unwrap();
        assert!(check_files(&suite, &[tensorflow]).is_ok());
        std::fs::remove_dir_all(&suite).unwrap();
    }

    #[test]
    fn a_missing_suite_says_where_it_looked_and_how_to_point_elsewhere() {
        let err = locate(Some(PathBuf::from("/nonexistent/suite")), Path::new("/")).unwrap_err();
        assert_eq!(
            err,
            "Horovod's test suite is not at /nonexistent/suite (--suite): no run.sh there. \
             Pass --suite DIR or set HVD_HOROVOD_TESTS to the directory holding run.sh, \
             upstream/ and shim/"
        );
    }

    #[test]
    fn every_example_must_exit_zero() {
        let lines: Vec<String> = [
            "synthetic benchmark plain: rc=0",
            "synthetic benchmark --fp16-allreduce: rc=0",
            "synthetic benchmark --use-adasum: rc=1",
            "mnist (synthetic files): rc=0",
        ]
        .map(String::from)
        .to_vec();
        let verdicts = examples(&lines);
        assert_eq!(verdicts[0].1, Verdict::Passed);
        assert_eq!(
            verdicts[2].1,
            Verdict::Unexpected("exited with code 1".into())
        );
        assert_eq!(verdicts[4].1, Verdict::Unexpected("did not run".into()));
    }

    #[test]
    fn files_are_picked_by_name_and_each_names_its_keras() {
        let options =
            Options::parse(&["--files".into(), "torch,tensorflow-tf_keras".into()]).unwrap();
        assert_eq!(
            options
                .files
                .iter()
                .map(|f| (f.file, f.keras2))
                .collect::<Vec<_>>(),
            [("test_torch.py", false), ("test_tensorflow.py", true)]
        );
        assert_eq!(Options::parse(&[]).unwrap().files, FILES);
        assert_eq!(
            Options::parse(&["--files".into(), "keras".into()]).unwrap_err(),
            "horovod-tests: --files takes torch, tensorflow, tensorflow-tf_keras, \
             tensorflow2_keras-tf_keras (comma-separated), got \"keras\""
        );
    }

    #[test]
    fn parts_are_runner_modes() {
        let options = Options::parse(&["--parts".into(), "whole,examples".into()]).unwrap();
        assert_eq!(options.parts, [Part::Whole, Part::Examples]);
        assert_eq!(
            Options::parse(&["--parts".into(), "all".into()]).unwrap_err(),
            "horovod-tests: --parts takes whole, iso and examples (comma-separated), got \"all\""
        );
    }
}
