//! The agent: the critic and actor networks (separate, or one trunk with two heads),
//! the policy head (categorical or diagonal Gaussian) and how they run on a backend.

use super::*;

/// What the actor outputs.
#[derive(Clone, Debug, PartialEq)]
pub enum Head {
    /// Logits over `n` actions.
    Categorical { n: usize },
    /// Means of a diagonal Gaussian; log-stds are free parameters; actions are clipped
    /// to the bounds before they reach the env (as Gymnasium's `ClipAction`).
    Gaussian {
        dim: usize,
        low: Vec<f32>,
        high: Vec<f32>,
        logstd: usize,
    },
}

impl Head {
    /// The log-stds of a Gaussian head among the agent's `params` (a categorical head
    /// has none).
    pub fn logstd<'p>(&self, params: &'p [f32]) -> &'p [f32] {
        match self {
            Head::Gaussian { logstd, dim, .. } => &params[*logstd..*logstd + *dim],
            Head::Categorical { .. } => &[],
        }
    }
}

/// Index of the critic in the agent's [`NetLayout`] (networks apart).
pub const CRITIC: usize = 0;
/// Index of the actor in the agent's [`NetLayout`] (networks apart).
pub const ACTOR: usize = 1;
/// Index of the one network of an agent with a shared trunk.
pub const SHARED: usize = 0;

/// Low and high bounds of a Box action space.
pub(super) type Bounds = (Vec<f32>, Vec<f32>);

/// `(h, w, planes)` of an image observation space (a Box of shape `[h, w, planes]`
/// with room for a 3x3 valid convolution).
pub fn image_shape(space: &Space) -> Option<(usize, usize, usize)> {
    match space {
        Space::Box { shape, .. } if shape.len() == 3 && shape[0] >= 3 && shape[1] >= 3 => {
            Some((shape[0], shape[1], shape[2]))
        }
        _ => None,
    }
}

/// `(planes, h, w)` of a planes-first image observation space the Nature CNN reads
/// (at least 36 x 36), and the input scale: 1/255 for bytes (`high` 255).
pub fn nature_shape(space: &Space) -> Option<((usize, usize, usize), f32)> {
    match space {
        Space::Box { shape, high, .. } if shape.len() == 3 && shape[1] >= 36 && shape[2] >= 36 => {
            let scale = if high.iter().all(|&h| h == 255.0) {
                1.0 / 255.0
            } else {
                1.0
            };
            Some(((shape[0], shape[1], shape[2]), scale))
        }
        _ => None,
    }
}

/// The networks of an agent.
#[derive(Clone, Debug)]
pub enum AgentNets {
    /// Critic and actor apart, `[critic | actor]` ([`CRITIC`], [`ACTOR`]): CleanRL's MLP
    /// agents, MinAtar's CNNs.
    Separate { critic: Net, actor: Net },
    /// One network ([`SHARED`]) whose output 0 is the value and outputs 1.. the
    /// policy's: CleanRL's Atari agent (one Nature CNN trunk, two linear heads).
    Shared(Net),
}

/// Actor and critic in one flat parameter buffer, then the Gaussian log-stds. MLPs
/// (tanh or ReLU), for image observations MinAtar's network (one 3x3 convolution, ReLU, then
/// ReLU layers) each, or one Nature CNN with both heads.
#[derive(Clone, Debug)]
pub struct Agent {
    pub obs_dim: usize,
    pub nets: AgentNets,
    pub head: Head,
    pub params: Vec<f32>,
}

/// Which outputs of an agent: the value, or the policy head's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Part {
    Value,
    Policy,
}

/// Copies columns `from..from + cols` of the `rows x width` matrix `m` into `out`.
pub(super) fn columns(
    m: &[f32],
    rows: usize,
    width: usize,
    from: usize,
    cols: usize,
    out: &mut Vec<f32>,
) {
    out.clear();
    if (from, cols) == (0, width) {
        out.extend_from_slice(&m[..rows * width]);
        return;
    }
    for r in 0..rows {
        out.extend_from_slice(&m[r * width + from..r * width + from + cols]);
    }
}

impl Agent {
    /// The networks' shapes without the parameters (for threads that run the policy
    /// from a parameter copy of their own), without copying the parameters first.
    pub(super) fn shapes(&self) -> Agent {
        Agent {
            obs_dim: self.obs_dim,
            nets: self.nets.clone(),
            head: self.head.clone(),
            params: Vec::new(),
        }
    }

    pub fn new(
        obs_dim: usize,
        action_space: &Space,
        hidden: &[usize],
        activation: crate::nn::Activation,
        init_logstd: f64,
        rng: &mut Rng,
    ) -> Agent {
        let sizes = |out: usize| -> Vec<usize> {
            std::iter::once(obs_dim)
                .chain(hidden.iter().copied())
                .chain([out])
                .collect()
        };
        let (out, _) = Self::outputs(action_space);
        let critic = Mlp::with_activation(&sizes(1), 0, activation);
        let actor = Mlp::with_activation(&sizes(out), critic.end(), activation);
        Self::assemble(
            obs_dim,
            AgentNets::Separate {
                critic: critic.into(),
                actor: actor.into(),
            },
            action_space,
            init_logstd,
            rng,
        )
    }

    /// The agent `cfg` asks for on `spec`'s spaces: MLPs, MinAtar's convolutional
    /// networks with `conv_channels`, or the Nature CNN with `cnn = "nature"` (the
    /// caller has validated the config).
    pub fn for_config(spec: &rlrig_env::EnvSpec, cfg: &PpoConfig, rng: &mut Rng) -> Agent {
        let (out, _) = Self::outputs(&spec.action_space);
        if cfg.cnn == "nature" {
            let (shape, scale) =
                nature_shape(&spec.observation_space).expect("validated: image observations");
            let net = ConvNet::tower(shape, &NATURE, 0, &cfg.hidden, 1 + out, 0).with_scale(scale);
            return Self::assemble(
                spec.obs_dim,
                AgentNets::Shared(net.into()),
                &spec.action_space,
                cfg.init_logstd,
                rng,
            );
        }
        match image_shape(&spec.observation_space).filter(|_| cfg.conv_channels > 0) {
            None => Agent::new(
                spec.obs_dim,
                &spec.action_space,
                &cfg.hidden,
                cfg.activation.nn(),
                cfg.init_logstd,
                rng,
            ),
            Some((h, w, planes)) => {
                let net = |outputs: usize, offset: usize| {
                    ConvNet::new(
                        planes,
                        h,
                        w,
                        cfg.conv_channels,
                        3,
                        0,
                        0,
                        &cfg.hidden,
                        outputs,
                        offset,
                    )
                    .with_channels_last()
                };
                let critic = net(1, 0);
                let actor = net(out, critic.end());
                Self::assemble(
                    spec.obs_dim,
                    AgentNets::Separate {
                        critic: critic.into(),
                        actor: actor.into(),
                    },
                    &spec.action_space,
                    cfg.init_logstd,
                    rng,
                )
            }
        }
    }

    /// Actor outputs and, for Box actions, their bounds (low, high).
    pub(super) fn outputs(action_space: &Space) -> (usize, Option<Bounds>) {
        match action_space {
            Space::Discrete { n } => (*n as usize, None),
            Space::Box { low, high, .. } => (low.len(), Some((low.clone(), high.clone()))),
        }
    }

    pub(super) fn assemble(
        obs_dim: usize,
        nets: AgentNets,
        action_space: &Space,
        init_logstd: f64,
        rng: &mut Rng,
    ) -> Agent {
        let (out, head) = Self::outputs(action_space);
        let nets_end = match &nets {
            AgentNets::Separate { actor, .. } => actor.end(),
            AgentNets::Shared(net) => net.end(),
        };
        let head = match head {
            None => Head::Categorical { n: out },
            Some((low, high)) => Head::Gaussian {
                dim: out,
                low,
                high,
                logstd: nets_end,
            },
        };
        let total = nets_end
            + if matches!(head, Head::Gaussian { .. }) {
                out
            } else {
                0
            };
        let mut params = vec![0.0; total];
        // CleanRL's layer_init: sqrt(2) hidden, 1.0 critic output, 0.01 actor output.
        let init = |net: &Net, out_gain: f32, params: &mut [f32], rng: &mut Rng| match net {
            Net::Mlp(m) => m.init(params, std::f32::consts::SQRT_2, out_gain, rng),
            Net::Conv(c) => c.init(params, std::f32::consts::SQRT_2, out_gain, rng),
        };
        match &nets {
            AgentNets::Separate { critic, actor } => {
                init(critic, 1.0, &mut params, rng);
                init(actor, 0.01, &mut params, rng);
            }
            AgentNets::Shared(net) => {
                init(net, 1.0, &mut params, rng);
                // The two heads are one output layer: the value column with gain 1,
                // the policy's columns with 0.01, each orthogonal on its own.
                let Net::Conv(c) = net else {
                    unreachable!("shared trunks are CNNs")
                };
                let last = c.head.layers().last().expect("a head layer");
                let (fi, fo) = (last.fan_in, last.fan_out);
                let mut value = vec![0.0; fi];
                let mut policy = vec![0.0; fi * (fo - 1)];
                crate::nn::orthogonal(&mut value, fi, 1, 1.0, rng);
                crate::nn::orthogonal(&mut policy, fi, fo - 1, 0.01, rng);
                for r in 0..fi {
                    let row = &mut params[last.w + r * fo..last.w + (r + 1) * fo];
                    row[0] = value[r];
                    row[1..].copy_from_slice(&policy[r * (fo - 1)..(r + 1) * (fo - 1)]);
                }
            }
        }
        if let Head::Gaussian { logstd, dim, .. } = &head {
            params[*logstd..*logstd + *dim].fill(init_logstd as f32);
        }
        Agent {
            obs_dim,
            nets,
            head,
            params,
        }
    }

    /// The networks and the log-std for a [`NetBackend`].
    pub fn layout(&self) -> NetLayout {
        let free = match &self.head {
            Head::Gaussian { logstd, dim, .. } => *logstd..*logstd + *dim,
            Head::Categorical { .. } => self.params.len()..self.params.len(),
        };
        let nets = match &self.nets {
            AgentNets::Separate { critic, actor } => vec![critic.clone(), actor.clone()],
            AgentNets::Shared(net) => vec![net.clone()],
        };
        NetLayout {
            nets,
            free,
            total: self.params.len(),
        }
    }

    /// The networks by their names in an export: `actor` and `critic`, or `net`.
    pub fn named_nets(&self) -> Vec<(&'static str, &Net)> {
        match &self.nets {
            AgentNets::Separate { critic, actor } => vec![("actor", actor), ("critic", critic)],
            AgentNets::Shared(net) => vec![("net", net)],
        }
    }

    pub fn action_dim(&self) -> usize {
        match &self.head {
            Head::Categorical { .. } => 1,
            Head::Gaussian { dim, .. } => *dim,
        }
    }

    /// Whether the actor and the critic are separate networks ([`ACTOR`], [`CRITIC`]),
    /// which a pass can run apart or side by side, rather than one shared trunk.
    pub fn separate_nets(&self) -> bool {
        matches!(self.nets, AgentNets::Separate { .. })
    }

    /// Outputs of the policy head per observation (logits or Gaussian means).
    pub fn policy_dim(&self) -> usize {
        match &self.head {
            Head::Categorical { n } => *n,
            Head::Gaussian { dim, .. } => *dim,
        }
    }

    /// The network that computes `part` (its index in [`Agent::layout`]) and where
    /// `part` sits in that network's output rows: (width, first column, columns).
    pub(super) fn locate(&self, part: Part) -> (usize, &Net, (usize, usize, usize)) {
        let p = self.policy_dim();
        match (&self.nets, part) {
            (AgentNets::Separate { critic, .. }, Part::Value) => (CRITIC, critic, (1, 0, 1)),
            (AgentNets::Separate { actor, .. }, Part::Policy) => (ACTOR, actor, (p, 0, p)),
            (AgentNets::Shared(net), Part::Value) => (SHARED, net, (1 + p, 0, 1)),
            (AgentNets::Shared(net), Part::Policy) => (SHARED, net, (1 + p, 1, p)),
        }
    }

    /// `part` of `n` observations on the host (`params` in this agent's layout), into
    /// `out` (`n x policy_dim` for the policy, `n` values).
    pub fn head_on_host(
        &self,
        part: Part,
        params: &[f32],
        obs: &[f32],
        n: usize,
        cache: &mut NetCache,
        out: &mut Vec<f32>,
    ) {
        let (_, net, (width, from, cols)) = self.locate(part);
        columns(
            net.forward(params, obs, n, cache),
            n,
            width,
            from,
            cols,
            out,
        );
    }

    /// `part` of `n` observations on `backend`, into `out`.
    pub fn head_on(
        &self,
        part: Part,
        backend: &mut dyn NetBackend,
        obs: &[f32],
        n: usize,
        out: &mut Vec<f32>,
    ) {
        let (id, _, (width, from, cols)) = self.locate(part);
        columns(backend.forward(id, obs, n), n, width, from, cols, out);
    }

    /// Policy outputs (into `policy`, `n x policy_dim`) and values (into `values`) of
    /// `n` observations on `backend`; with `train`, the backend keeps the activations
    /// for [`Agent::backward`].
    pub fn forward(
        &self,
        backend: &mut dyn NetBackend,
        obs: &[f32],
        n: usize,
        train: bool,
        policy: &mut [f32],
        values: &mut [f32],
    ) {
        match &self.nets {
            AgentNets::Separate { .. } if train => {
                backend.forward_into(
                    Weights::Train,
                    &[ACTOR, CRITIC],
                    obs,
                    n,
                    &mut [policy, values],
                );
            }
            AgentNets::Separate { .. } => {
                values.copy_from_slice(backend.forward(CRITIC, obs, n));
                policy.copy_from_slice(backend.forward(ACTOR, obs, n));
            }
            AgentNets::Shared(_) => {
                let y = if train {
                    backend.forward_train(SHARED, obs, n)
                } else {
                    backend.forward(SHARED, obs, n)
                };
                let p = self.policy_dim();
                for (r, row) in y.chunks_exact(1 + p).enumerate() {
                    values[r] = row[0];
                    policy[r * p..(r + 1) * p].copy_from_slice(&row[1..]);
                }
            }
        }
    }

    /// The backward pass of the last training [`Agent::forward`] given d loss / d policy
    /// outputs and d loss / d values (`scratch` joins them for a shared trunk).
    pub fn backward(
        &self,
        backend: &mut dyn NetBackend,
        d_policy: &[f32],
        d_values: &[f32],
        scratch: &mut Vec<f32>,
    ) {
        match &self.nets {
            AgentNets::Separate { .. } => {
                backend.backward_many(&[(ACTOR, d_policy), (CRITIC, d_values)]);
            }
            AgentNets::Shared(_) => {
                let p = self.policy_dim();
                scratch.clear();
                for (r, dv) in d_values.iter().enumerate() {
                    scratch.push(*dv);
                    scratch.extend_from_slice(&d_policy[r * p..(r + 1) * p]);
                }
                backend.backward(SHARED, scratch);
            }
        }
    }
}
