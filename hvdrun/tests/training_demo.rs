//! The training demo (the README's first command) learns, and 2 ranks with the same
//! global batch reach what 1 rank reaches: gradient averaging is exact data parallelism.

#[path = "common/example.rs"]
mod example;

use std::process::Command;

/// `(loss, accuracy)` of the last epoch.
fn train(np: usize) -> (String, f64) {
    let out = Command::new(example::example("train_logistic"))
        .args(["--np", &np.to_string(), "--epochs", "3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout.lines().last().unwrap_or_default().to_string();
    let field = |name: &str| {
        last.split(name)
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or_default()
            .to_string()
    };
    (
        field("loss"),
        field("accuracy").trim_end_matches('%').parse().unwrap(),
    )
}

#[test]
fn two_ranks_learn_what_one_rank_learns() {
    let (loss_1, accuracy_1) = train(1);
    let (loss_2, accuracy_2) = train(2);
    assert!(accuracy_1 > 90.0, "the model learns: {accuracy_1}%");
    assert!(
        (accuracy_1 - accuracy_2).abs() <= 1.0,
        "1 rank {accuracy_1}%, 2 ranks {accuracy_2}%"
    );
    assert_eq!(loss_1, loss_2, "same global batch, same averaged gradients");
}
