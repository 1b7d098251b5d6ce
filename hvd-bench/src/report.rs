//! Printing results: an aligned table for people, JSON lines for scripts.

use crate::measure::Row;

/// The table header, naming what was measured.
pub fn header(op: &str, backend: &str, np: usize, reduce: &str) -> String {
    format!(
        "# hvd-bench {op}  backend {backend}  np {np}  op {reduce}  (time: max over ranks of barrier;t0;op;t1, median over iterations)\n\
         #{:>11} {:>11} {:>6} {:>6} {:>12} {:>12} {:>12} {:>11} {:>11} {:>6}",
        "size",
        "count",
        "dtype",
        "iters",
        "median(us)",
        "min(us)",
        "max(us)",
        "algbw(GB/s)",
        "busbw(GB/s)",
        "check"
    )
}

/// One table row.
pub fn table_row(row: &Row) -> String {
    format!(
        " {:>11} {:>11} {:>6} {:>6} {:>12.2} {:>12.2} {:>12.2} {:>11.3} {:>11.3} {:>6}",
        row.bytes,
        row.count,
        row.dtype.name(),
        row.iters,
        row.time_us_median,
        row.time_us_min,
        row.time_us_max,
        row.algbw_gbps(),
        row.busbw_gbps(),
        check_word(row.checked)
    )
}

fn check_word(checked: Option<bool>) -> &'static str {
    match checked {
        None => "-",
        Some(true) => "ok",
        Some(false) => "WRONG",
    }
}

/// One JSON object, on one line.
pub fn json_row(row: &Row, backend: &str) -> String {
    format!(
        "{{\"op\":\"{}\",\"backend\":\"{backend}\",\"np\":{},\"bytes\":{},\"dtype\":\"{}\",\"iters\":{},\"time_us_median\":{:.3},\"time_us_min\":{:.3},\"time_us_max\":{:.3},\"algbw_gbps\":{:.4},\"busbw_gbps\":{:.4},\"check\":{}}}",
        row.op.name(),
        row.np,
        row.bytes,
        row.dtype.name(),
        row.iters,
        row.time_us_median,
        row.time_us_min,
        row.time_us_max,
        row.algbw_gbps(),
        row.busbw_gbps(),
        match row.checked {
            None => "null",
            Some(true) => "true",
            Some(false) => "false",
        }
    )
}
