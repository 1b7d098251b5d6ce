//! Cholesky factorisation of a small symmetric positive-definite matrix, and the solves a
//! Gaussian process needs. Dense and O(n³): the tuner holds a few dozen points at most,
//! where this is microseconds and a linear-algebra crate would only add a dependency.

/// `A = L Lᵀ` for a symmetric positive-definite `A`.
#[derive(Clone, Debug)]
pub(super) struct Cholesky {
    n: usize,
    /// `L`, lower triangular, row-major `n × n`.
    l: Vec<f64>,
}

impl Cholesky {
    /// Factorises the row-major `n × n` matrix `a` (only its lower triangle is read).
    /// `None` when `a` is not numerically positive definite or holds NaN.
    pub(super) fn new(a: &[f64], n: usize) -> Option<Cholesky> {
        if a.len() != n * n {
            return None;
        }
        let mut l = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let dot: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
                let s = a[i * n + j] - dot;
                if i == j {
                    if s.is_nan() || s <= 0.0 {
                        return None;
                    }
                    l[i * n + i] = s.sqrt();
                } else {
                    l[i * n + j] = s / l[j * n + j];
                }
            }
        }
        Some(Cholesky { n, l })
    }

    /// Solves `L y = b`.
    pub(super) fn solve_lower(&self, b: &[f64]) -> Vec<f64> {
        let n = self.n;
        let mut y = vec![0.0; n];
        for i in 0..n {
            let dot: f64 = (0..i).map(|k| self.l[i * n + k] * y[k]).sum();
            y[i] = (b[i] - dot) / self.l[i * n + i];
        }
        y
    }

    /// Solves `A x = b`.
    pub(super) fn solve(&self, b: &[f64]) -> Vec<f64> {
        let n = self.n;
        let mut x = self.solve_lower(b);
        // Back substitution with Lᵀ, in place.
        for i in (0..n).rev() {
            let dot: f64 = (i + 1..n).map(|k| self.l[k * n + i] * x[k]).sum();
            x[i] = (x[i] - dot) / self.l[i * n + i];
        }
        x
    }

    /// `ln det(A) / 2`, which is `Σ ln Lᵢᵢ`.
    pub(super) fn half_log_det(&self) -> f64 {
        (0..self.n).map(|i| self.l[i * self.n + i].ln()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_known_system() {
        // A = [[4, 2], [2, 3]] = L Lᵀ with L = [[2, 0], [1, √2]]; det A = 8.
        let chol = Cholesky::new(&[4.0, 2.0, 2.0, 3.0], 2).expect("positive definite");
        let x = chol.solve(&[2.0, 5.0]);
        // 4x + 2y = 2, 2x + 3y = 5  =>  x = -0.5, y = 2.
        assert!(
            (x[0] + 0.5).abs() < 1e-12 && (x[1] - 2.0).abs() < 1e-12,
            "{x:?}"
        );
        assert!((chol.half_log_det() - 8f64.ln() / 2.0).abs() < 1e-12);
    }

    #[test]
    fn rejects_matrices_that_are_not_positive_definite() {
        assert!(Cholesky::new(&[1.0, 1.0, 1.0, 1.0], 2).is_none());
        assert!(Cholesky::new(&[1.0, 0.0, 0.0, -1.0], 2).is_none());
        assert!(Cholesky::new(&[f64::NAN], 1).is_none());
        assert!(Cholesky::new(&[1.0, 2.0], 2).is_none());
    }
}
