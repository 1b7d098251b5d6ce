//! `job_secret` reads the process environment, so it is tested alone in a binary of its
//! own: no other test's thread reads the environment while this one changes it.

use hvd_core::env::job_secret;

#[test]
fn the_secret_is_the_variables_bytes_or_empty() {
    // SAFETY: this binary runs this one test, so no other thread reads the environment.
    unsafe { std::env::remove_var("HVD_SECRET") };
    assert_eq!(job_secret(), b"");
    // SAFETY: as above.
    unsafe { std::env::set_var("HVD_SECRET", "s3cret") };
    assert_eq!(job_secret(), b"s3cret");
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let raw = std::ffi::OsStr::from_bytes(&[0xff, b'k', 0xfe]);
        // SAFETY: as above.
        unsafe { std::env::set_var("HVD_SECRET", raw) };
        assert_eq!(job_secret(), [0xff, b'k', 0xfe]);
    }
}
