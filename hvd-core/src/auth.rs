//! Proofs that the end of a connection holds the job's shared secret
//! ([`job_secret`](crate::env::job_secret)), as the TCP transport's handshake and the
//! rendezvous store's frames carry them.
//!
//! A proof is HMAC-SHA256 under the secret of a label and then the parts, one after the
//! other. The label says who proves it, in which role or direction, so that one side's
//! proof cannot be reflected back as the other's; the parts bind it to one connection
//! (fresh nonces) and one message, so that a recorded proof cannot be replayed. Parts are
//! concatenated without lengths: a caller whose parts vary in length must make their
//! boundaries unambiguous by other means (fixed sizes, or values both ends check).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The size of a proof.
pub const PROOF_BYTES: usize = 32;

/// The proof of `label` and `parts` under `secret`. Any secret works, the empty one
/// included.
pub fn prove(secret: &[u8], label: &str, parts: &[&[u8]]) -> [u8; PROOF_BYTES] {
    mac(secret, label, parts).finalize().into_bytes().into()
}

/// Whether `proof` is the proof of `label` and `parts` under `secret`, compared in
/// constant time so that a forger learns nothing from how long a refusal takes.
pub fn verify(secret: &[u8], label: &str, parts: &[&[u8]], proof: &[u8]) -> bool {
    mac(secret, label, parts).verify_slice(proof).is_ok()
}

fn mac(secret: &[u8], label: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .expect("HMAC-SHA256 accepts a key of any length");
    mac.update(label.as_bytes());
    for part in parts {
        mac.update(part);
    }
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_is_hmac_sha256_of_the_label_then_the_parts() {
        // RFC 4231, test case 2, with its data split into a label and two parts.
        let expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        let proof = prove(b"Jefe", "what do ya want ", &[b"for ", b"nothing?"]);
        let hex: String = proof.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expected);
    }

    #[test]
    fn only_the_same_secret_label_and_parts_verify() {
        let proof = prove(b"secret", "dialer", &[b"nonce", b"body"]);
        assert!(verify(b"secret", "dialer", &[b"nonce", b"body"], &proof));
        assert!(!verify(b"other", "dialer", &[b"nonce", b"body"], &proof));
        assert!(!verify(b"secret", "listener", &[b"nonce", b"body"], &proof));
        assert!(!verify(b"secret", "dialer", &[b"nonce2", b"body"], &proof));
        assert!(!verify(
            b"secret",
            "dialer",
            &[b"nonce", b"body"],
            &proof[..31]
        ));
    }

    #[test]
    fn the_empty_secret_proves_too() {
        let proof = prove(b"", "Q", &[]);
        assert!(verify(b"", "Q", &[], &proof));
        assert!(!verify(b"x", "Q", &[], &proof));
    }
}
