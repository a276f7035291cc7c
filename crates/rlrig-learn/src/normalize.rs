//! Running mean and variance (Chan et al.'s parallel update, as Gymnasium's
//! `RunningMeanStd`), for observation and return normalisation.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunningMeanStd {
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
    pub count: f64,
}

impl RunningMeanStd {
    pub fn new(dim: usize) -> RunningMeanStd {
        RunningMeanStd {
            mean: vec![0.0; dim],
            var: vec![1.0; dim],
            count: 1e-4,
        }
    }

    /// Folds in a batch of `rows` (each `dim` long), in index order.
    pub fn update(&mut self, batch: &[f32], rows: usize) {
        let dim = self.mean.len();
        if rows == 0 {
            return;
        }
        for j in 0..dim {
            let col = (0..rows).map(|r| f64::from(batch[r * dim + j]));
            let bmean = col.clone().sum::<f64>() / rows as f64;
            let bvar = col.map(|x| (x - bmean) * (x - bmean)).sum::<f64>() / rows as f64;
            let n = rows as f64;
            let delta = bmean - self.mean[j];
            let tot = self.count + n;
            let m2 = self.var[j] * self.count + bvar * n + delta * delta * self.count * n / tot;
            self.mean[j] += delta * n / tot;
            self.var[j] = m2 / tot;
        }
        self.count += rows as f64;
    }

    /// `(x - mean) / sqrt(var + 1e-8)`, clipped to `[-clip, clip]`, in place.
    pub fn normalize(&self, x: &mut [f32], clip: f64) {
        let dim = self.mean.len();
        for row in x.chunks_exact_mut(dim) {
            for (j, v) in row.iter_mut().enumerate() {
                let z = (f64::from(*v) - self.mean[j]) / (self.var[j] + 1e-8).sqrt();
                *v = z.clamp(-clip, clip) as f32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_updates_match_the_whole_sample() {
        let data: Vec<f32> = (0..100)
            .map(|i| (i as f32 * 0.37).sin() * 3.0 + 1.0)
            .collect();
        let mut a = RunningMeanStd::new(1);
        for chunk in data.chunks(7) {
            a.update(chunk, chunk.len());
        }
        let mean = data.iter().map(|x| f64::from(*x)).sum::<f64>() / 100.0;
        let var = data
            .iter()
            .map(|x| (f64::from(*x) - mean).powi(2))
            .sum::<f64>()
            / 100.0;
        assert!((a.mean[0] - mean).abs() < 1e-4, "{} vs {mean}", a.mean[0]);
        assert!((a.var[0] - var).abs() < 1e-3, "{} vs {var}", a.var[0]);
    }
}
