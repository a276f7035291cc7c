//! The policy-value network (MLP or residual tower) and its evaluators for the search.

use super::*;

/// The policy-value network: an MLP over the observation with `ACTIONS + 1` outputs.
#[derive(Clone, Debug)]
pub struct PolicyValue {
    pub net: Net,
    pub params: Vec<f32>,
    pub(super) actions: usize,
}

impl PolicyValue {
    pub fn new(obs_dim: usize, actions: usize, hidden: &[usize], rng: &mut Rng) -> PolicyValue {
        let sizes: Vec<usize> = std::iter::once(obs_dim)
            .chain(hidden.iter().copied())
            .chain(std::iter::once(actions + 1))
            .collect();
        let mlp = Mlp::with_activation(&sizes, 0, Activation::Relu);
        PolicyValue::initialised(mlp.into(), actions, rng)
    }

    /// `net` (its parameters from index 0) with PyTorch's default initialisation.
    fn initialised(net: Net, actions: usize, rng: &mut Rng) -> PolicyValue {
        let mut params = vec![0.0; net.end()];
        net.init_torch_default(&mut params, rng);
        PolicyValue {
            net,
            params,
            actions,
        }
    }

    /// A residual tower on the board's planes (`planes x h x w`, planes first): a 3x3
    /// same-padded stem with `channels` outputs, `blocks` residual blocks, then `hidden`
    /// units and the policy logits + value.
    #[allow(clippy::too_many_arguments)]
    pub fn residual(
        planes: usize,
        h: usize,
        w: usize,
        actions: usize,
        channels: usize,
        blocks: usize,
        hidden: &[usize],
        rng: &mut Rng,
    ) -> PolicyValue {
        let net = ConvNet::new(planes, h, w, channels, 3, 1, blocks, hidden, actions + 1, 0);
        PolicyValue::initialised(net.into(), actions, rng)
    }

    /// Connect Four's network as `cfg` describes it: the MLP, or the residual tower
    /// when `cfg.channels > 0`.
    pub fn for_config(cfg: &AzConfig, rng: &mut Rng) -> PolicyValue {
        use rlrig_env::games::connect_four::{HEIGHT, WIDTH};
        let (obs, a) = (ConnectFour::OBS_DIM, ConnectFour::ACTIONS);
        if cfg.channels == 0 {
            PolicyValue::new(obs, a, &cfg.hidden, rng)
        } else {
            let planes = obs / (HEIGHT * WIDTH);
            PolicyValue::residual(
                planes,
                HEIGHT,
                WIDTH,
                a,
                cfg.channels,
                cfg.blocks,
                &cfg.hidden,
                rng,
            )
        }
    }

    /// The network for a [`NetBackend`].
    pub fn layout(&self) -> NetLayout {
        NetLayout {
            nets: vec![self.net.clone()],
            free: self.params.len()..self.params.len(),
            total: self.params.len(),
        }
    }

    /// An [`Evaluator`] over these weights.
    pub fn evaluator(&self) -> NetEval<'_> {
        NetEval {
            net: self,
            cache: NetCache::default(),
        }
    }

    /// An [`Evaluator`] that owns the network (for an inference server thread).
    pub fn into_evaluator(self) -> OwnedNetEval {
        OwnedNetEval {
            net: self,
            cache: NetCache::default(),
        }
    }

    pub(super) fn forward_into(
        &self,
        cache: &mut NetCache,
        obs: &[f32],
        n: usize,
        logits: &mut [f32],
        values: &mut [f32],
    ) {
        let out = self.net.forward(&self.params, obs, n, cache);
        split_policy_value(out, self.actions, logits, values);
    }
}

/// Splits the network's rows (`actions` logits, then the raw value) into logits and
/// tanh-squashed values.
pub(super) fn split_policy_value(
    out: &[f32],
    actions: usize,
    logits: &mut [f32],
    values: &mut [f32],
) {
    let a = actions;
    for (r, row) in out.chunks_exact(a + 1).enumerate() {
        logits[r * a..(r + 1) * a].copy_from_slice(&row[..a]);
        values[r] = crate::nn::tanh(row[a]);
    }
}

/// A [`PolicyValue`] evaluator that owns its network.
pub struct OwnedNetEval {
    pub(super) net: PolicyValue,
    pub(super) cache: NetCache,
}

impl Evaluator for OwnedNetEval {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        self.net
            .forward_into(&mut self.cache, obs, n, logits, values);
    }
}

/// Runs a [`PolicyValue`] for search: one forward call per batch of leaves.
pub struct NetEval<'a> {
    pub(super) net: &'a PolicyValue,
    pub(super) cache: NetCache,
}

impl Evaluator for NetEval<'_> {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        self.net
            .forward_into(&mut self.cache, obs, n, logits, values);
    }
}
