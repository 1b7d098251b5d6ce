//! What the synthetic benchmark prints: Horovod's lines per measurement
//! (`Iter #0: ... img/sec per rank`, `Img/sec per rank: X +- Y`, `Total img/sec on N
//! rank(s): Z +- W`), then one table (or JSON lines) with scaling efficiency.

use hvd::Compression;

use super::compute::ComputePlan;
use super::models::Model;

/// One fusion and compression setting measured on `np` ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub np: usize,
    pub fusion: String,
    pub compression: Compression,
    /// Images per second per rank of each timed iteration (the slowest rank's time).
    pub images_per_sec: Vec<f64>,
}

impl Measurement {
    pub fn mean(&self) -> f64 {
        self.images_per_sec.iter().sum::<f64>() / self.images_per_sec.len().max(1) as f64
    }

    /// Half-width of the 95 % interval over iterations (1.96 standard deviations), as
    /// Horovod's benchmark prints it.
    pub fn spread(&self) -> f64 {
        let mean = self.mean();
        let variance = self
            .images_per_sec
            .iter()
            .map(|x| (x - mean).powi(2))
            .sum::<f64>()
            / self.images_per_sec.len().max(1) as f64;
        1.96 * variance.sqrt()
    }

    pub fn total(&self) -> f64 {
        self.np as f64 * self.mean()
    }

    /// One line of the results file a launching process reads back.
    pub fn to_record(&self) -> String {
        let rates: Vec<String> = self.images_per_sec.iter().map(f64::to_string).collect();
        format!(
            "{}\t{}\t{}\t{}",
            self.np,
            self.fusion,
            self.compression,
            rates.join(",")
        )
    }

    pub fn from_record(line: &str) -> Result<Measurement, String> {
        let bad = || format!("malformed result line {line:?}");
        let mut fields = line.split('\t');
        let (Some(np), Some(fusion), Some(compression), Some(rates), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return Err(bad());
        };
        Ok(Measurement {
            np: np.parse().map_err(|_| bad())?,
            fusion: fusion.to_owned(),
            compression: compression.parse().map_err(|_| bad())?,
            images_per_sec: rates
                .split(',')
                .map(|r| r.parse().map_err(|_| bad()))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// What every line of the report refers to.
pub struct Setup<'a> {
    pub model: &'a Model,
    pub batch_size: usize,
    pub plan: &'a ComputePlan,
}

impl Setup<'_> {
    /// Images per second per rank with no communication at all; none without compute.
    fn compute_rate(&self) -> Option<f64> {
        let seconds = self.plan.batch().as_secs_f64();
        (seconds > 0.0).then(|| self.batch_size as f64 / seconds)
    }

    /// The model and the compute, before the measurements.
    pub fn header(&self) -> String {
        let model = self.model;
        let bytes = model.parameter_count() * 4;
        format!(
            "Model: {} ({}x{} images), {} parameters in {} tensors ({:.1} MB of f32 gradients per batch)\n\
             Batch size: {} per rank; compute per batch {:.1} ms forward + {:.1} ms backward \
             ({} img/sec per rank with no communication)",
            model.architecture.name(),
            model.image_size,
            model.image_size,
            model.parameter_count(),
            model.tensor_count(),
            bytes as f64 / 1e6,
            self.batch_size,
            self.plan.forward.as_secs_f64() * 1e3,
            self.plan.backward.as_secs_f64() * 1e3,
            self.compute_rate()
                .map_or("unbounded".into(), |r| format!("{r:.1}")),
        )
    }

    /// Horovod's lines for one measurement.
    pub fn measurement(&self, m: &Measurement) -> String {
        let mut lines = vec![format!(
            "Fusion: {}, compression: {}, {} rank(s)",
            m.fusion, m.compression, m.np
        )];
        for (i, rate) in m.images_per_sec.iter().enumerate() {
            lines.push(format!("Iter #{i}: {rate:.1} img/sec per rank"));
        }
        lines.push(format!(
            "Img/sec per rank: {:.1} +- {:.1}",
            m.mean(),
            m.spread()
        ));
        lines.push(format!(
            "Total img/sec on {} rank(s): {:.1} +- {:.1}",
            m.np,
            m.total(),
            m.np as f64 * m.spread()
        ));
        lines.join("\n")
    }

    /// Scaling efficiency: total img/sec over `np` times the 1-rank job's (same fusion
    /// and compression), as Horovod defines it.
    fn scaling(&self, all: &[Measurement], m: &Measurement) -> Option<f64> {
        all.iter()
            .find(|b| b.np == 1 && b.fusion == m.fusion && b.compression == m.compression)
            .map(|b| m.total() / (m.np as f64 * b.mean()))
    }

    /// Total img/sec over the same job's with fusion off (same compression).
    fn fusion_speedup(&self, all: &[Measurement], m: &Measurement) -> Option<f64> {
        all.iter()
            .find(|b| {
                b.np == m.np
                    && b.compression == m.compression
                    && b.fusion == "off"
                    && m.fusion != "off"
            })
            .map(|b| m.total() / b.total())
    }

    /// Total img/sec over the same job's without compression (same fusion).
    fn compression_speedup(&self, all: &[Measurement], m: &Measurement) -> Option<f64> {
        all.iter()
            .find(|b| {
                b.np == m.np
                    && b.fusion == m.fusion
                    && b.compression == Compression::None
                    && m.compression != Compression::None
            })
            .map(|b| m.total() / b.total())
    }

    /// The closing table, or JSON lines, over every measurement.
    pub fn summary(&self, all: &[Measurement], json: bool) -> String {
        let percent = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:.1}%", x * 100.0));
        let gain = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:+.1}%", (x - 1.0) * 100.0));
        let mut lines = Vec::new();
        if !json {
            lines.push(format!(
                "# hvd-bench synthetic  model {}  batch {} per rank  compute {:.1} ms per batch  \
                 (img/sec: the slowest rank's, mean over iterations; efficiency: total over \
                 ranks x the 1-rank job's)",
                self.model.architecture.name(),
                self.batch_size,
                self.plan.batch().as_secs_f64() * 1e3,
            ));
            lines.push(format!(
                "# {:<8} {:<8} {:>5} {:>13} {:>8} {:>14} {:>12} {:>12} {:>14} {:>14}",
                "fusion",
                "compress",
                "ranks",
                "img/sec/rank",
                "+-",
                "total img/sec",
                "scaling eff",
                "vs compute",
                "vs fusion off",
                "vs no compress"
            ));
        }
        for m in all {
            let scaling = self.scaling(all, m);
            let speedup = self.fusion_speedup(all, m);
            let compressed = self.compression_speedup(all, m);
            let compute = self.compute_rate().map(|rate| m.mean() / rate);
            if json {
                let null = |x: Option<f64>| x.map_or("null".into(), |x| format!("{x:.4}"));
                lines.push(format!(
                    "{{\"op\":\"synthetic\",\"model\":\"{}\",\"np\":{},\"fusion\":\"{}\",\"compression\":\"{}\",\"batch_size\":{},\
                     \"compute_ms\":{:.3},\"iters\":{},\"img_sec_per_rank\":{:.3},\"img_sec_per_rank_ci\":{:.3},\
                     \"total_img_sec\":{:.3},\"scaling_efficiency\":{},\"compute_efficiency\":{},\
                     \"fusion_speedup\":{},\"compression_speedup\":{}}}",
                    self.model.architecture.name(),
                    m.np,
                    m.fusion,
                    m.compression,
                    self.batch_size,
                    self.plan.batch().as_secs_f64() * 1e3,
                    m.images_per_sec.len(),
                    m.mean(),
                    m.spread(),
                    m.total(),
                    null(scaling),
                    null(compute),
                    null(speedup),
                    null(compressed),
                ));
            } else {
                lines.push(format!(
                    "  {:<8} {:<8} {:>5} {:>13.1} {:>8.1} {:>14.1} {:>12} {:>12} {:>14} {:>14}",
                    m.fusion,
                    m.compression.name(),
                    m.np,
                    m.mean(),
                    m.spread(),
                    m.total(),
                    percent(scaling),
                    percent(compute),
                    gain(speedup),
                    gain(compressed),
                ));
            }
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::models::Architecture;
    use std::time::Duration;

    fn measured(np: usize, fusion: &str, rates: &[f64]) -> Measurement {
        compressed(np, fusion, Compression::None, rates)
    }

    fn compressed(np: usize, fusion: &str, compression: Compression, rates: &[f64]) -> Measurement {
        Measurement {
            np,
            fusion: fusion.into(),
            compression,
            images_per_sec: rates.to_vec(),
        }
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_named() {
        let m = compressed(4, "64m", Compression::Bf16, &[101.25, 99.5]);
        assert_eq!(Measurement::from_record(&m.to_record()), Ok(m));
        let error = Measurement::from_record("4\ton").expect_err("two fields");
        assert_eq!(error, "malformed result line \"4\\ton\"");
        assert_eq!(
            Measurement::from_record("x\ton\tnone\t1"),
            Err("malformed result line \"x\\ton\\tnone\\t1\"".to_string())
        );
        assert_eq!(
            Measurement::from_record("2\ton\tfp8\t1"),
            Err("malformed result line \"2\\ton\\tfp8\\t1\"".to_string())
        );
    }

    #[test]
    fn efficiency_and_fusion_gain_come_from_the_matching_jobs() {
        let model = Architecture::Resnet50.build();
        let plan = ComputePlan::new(&model, Duration::from_millis(320));
        let setup = Setup {
            model: &model,
            batch_size: 32,
            plan: &plan,
        };
        let all = [
            measured(1, "on", &[100.0, 100.0]),
            measured(2, "on", &[90.0, 80.0]),
            measured(2, "off", &[60.0, 60.0]),
            compressed(2, "on", Compression::Bf16, &[127.5, 127.5]),
        ];
        let table = setup.summary(&all, false);
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(rows.len(), 4, "{table}");
        // 2 ranks at 85 img/sec each against 1 rank at 100: 85 %; 170 / 120 = +41.7 %.
        assert!(
            rows[1].contains("85.0%") && rows[1].ends_with("+41.7%              -"),
            "{}",
            rows[1]
        );
        // bf16 at 255 img/sec against 170 uncompressed: +50 %; no 1-rank bf16 job.
        assert!(
            rows[3].contains("bf16") && rows[3].ends_with("+50.0%"),
            "{}",
            rows[3]
        );
        // The 2-rank fusion-off job has no 1-rank job of its own.
        assert!(rows[2].contains(" - "), "{}", rows[2]);
        let json = setup.summary(&all, true);
        let first = json.lines().nth(1).expect("two lines");
        assert!(first.contains("\"scaling_efficiency\":0.8500"), "{first}");
        assert!(first.contains("\"fusion_speedup\":1.4167"), "{first}");
        // 85 img/sec against 100 with no communication (32 images in 320 ms).
        assert!(first.contains("\"compute_efficiency\":0.8500"), "{first}");
    }

    #[test]
    fn no_compute_has_no_compute_efficiency() {
        let model = Architecture::Resnet50.build();
        let plan = ComputePlan::new(&model, Duration::ZERO);
        let setup = Setup {
            model: &model,
            batch_size: 32,
            plan: &plan,
        };
        assert!(
            setup
                .header()
                .ends_with("(unbounded img/sec per rank with no communication)")
        );
        let all = [measured(2, "on", &[50.0])];
        let row = setup.summary(&all, false);
        let fields: Vec<&str> = row
            .lines()
            .nth(2)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(fields[6], "-", "{row}");
        assert!(
            setup
                .summary(&all, true)
                .contains("\"compute_efficiency\":null")
        );
    }

    #[test]
    fn spread_is_horovods_interval() {
        let m = measured(2, "on", &[10.0, 20.0]);
        assert_eq!((m.mean(), m.spread(), m.total()), (15.0, 1.96 * 5.0, 30.0));
        assert!(
            Setup {
                model: &Architecture::Vgg16.build(),
                batch_size: 32,
                plan: &ComputePlan::new(&Architecture::Vgg16.build(), Duration::from_millis(10)),
            }
            .measurement(&m)
            .ends_with("Img/sec per rank: 15.0 +- 9.8\nTotal img/sec on 2 rank(s): 30.0 +- 19.6")
        );
    }
}
