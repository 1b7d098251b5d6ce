//! This package's examples, which `cargo test` and `cargo nextest` build beside its tests
//! when no test target is named; a run of one test file builds the one it needs.

use std::path::PathBuf;
use std::process::Command;

/// The built example `name`.
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // The test is target/<profile>/deps/<test>; examples are in target/<profile>/examples.
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join(name);
    if !path.is_file() {
        let built = Command::new(env!("CARGO"))
            .args(["build", "-p", "hvdrun", "--example", name])
            .status()
            .unwrap();
        assert!(built.success(), "building the example {name} failed");
    }
    assert!(
        path.is_file(),
        "the example {name} is not at {}",
        path.display()
    );
    path
}
