//! Training resident on the device: PPO whose envs, networks, rollout buffer, GAE,
//! minibatch updates and Adam state all live on the GPU, with many runs (seeds) as a
//! batch dimension.
//!
//! One workgroup trains one run and one dispatch is one PPO iteration of every run, so
//! an iteration costs one kernel launch, not one host round trip per env step or per
//! minibatch; the host reads metrics and parameters back when it asks for them. Each
//! run has its own parameters, optimiser, envs and random streams, and no sum crosses
//! runs: a run's result does not depend on the other runs in the launch.
//!
//! The kernels are WGSL run through wgpu (Vulkan, Metal, DX12: NVIDIA, AMD, Intel,
//! Apple), written once for every vendor. Tests run them on Mesa's software Vulkan
//! (lavapipe). Supported today: CartPole-v1, Acrobot-v1 and MountainCar-v0 (the device
//! envs with discrete actions) with two equal tanh hidden layers (PPO's
//! CleanRL/PureJaxRL shape); [`check`] says what else a config would need.

use rlrig_env::{Purpose, Rng, VecConfig};
use rlrig_learn::ppo::{Agent, Collection, MlpActivation, Optimizer, PpoConfig};
use wgpu::util::DeviceExt;

const PPO_WGSL: &str = include_str!("ppo.wgsl");
const FORWARD_WGSL: &str = include_str!("forward.wgsl");

/// Floats per env in the device's env buffer after the env's state: return, length,
/// done flag, episode count, return sum, length sum.
const ENV_EXTRA: usize = 6;
/// Floats of metrics per run and iteration (see ppo.wgsl's NM).
const NM: usize = 8;

pub mod envs;
mod error;

pub use error::GpuError;

/// The envs PPO trains on the device: the discrete classic-control ones of
/// [`envs::DEVICE_ENVS`] (Breakout's 400-value observation does not fit the kernel's
/// workgroup arrays; continuous actions are not in the kernel yet).
pub const PPO_ENVS: &[&str] = &["CartPole-v1", "Acrobot-v1", "MountainCar-v0"];

/// An open GPU (or software) adapter and its queue.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
}

impl Gpu {
    /// The high-performance adapter wgpu finds (`WGPU_BACKEND`, `WGPU_ADAPTER_NAME`
    /// narrow the choice), with its own limits.
    pub fn open() -> Result<Gpu, GpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        }))
        .map_err(|e| {
            GpuError::NoDevice(format!(
                "no GPU adapter found through wgpu ({e}); install a Vulkan driver (Mesa's \
                 software Vulkan works for testing: apt install mesa-vulkan-drivers libvulkan1)"
            ))
        })?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        // Timestamps where the adapter has them ([`ResidentPpo::profile`]).
        let features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("rlrig-gpu"),
            required_features: features,
            required_limits: limits,
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| GpuError::NoDevice(format!("cannot open GPU {}: {e}", info.name)))?;
        Ok(Gpu {
            device,
            queue,
            info,
        })
    }

    /// "NAME (BACKEND, DEVICE TYPE)".
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?})",
            self.info.name, self.info.backend, self.info.device_type
        )
    }

    fn wait(&self) -> Result<(), GpuError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| GpuError::Device(e.to_string()))
    }

    /// The first `len` 4-byte values of `buf`, copied back through a staging buffer.
    fn read<T: bytemuck::Pod>(&self, buf: &wgpu::Buffer, len: usize) -> Result<Vec<T>, GpuError> {
        let bytes = (len * 4) as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: bytes.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(buf, 0, &staging, 0, bytes);
        self.queue.submit([enc.finish()]);
        let slice = staging.slice(..bytes);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|e| GpuError::Device(format!("readback: {e}")))?
            .map_err(|e| GpuError::Device(format!("readback: {e}")))?;
        let view = slice
            .get_mapped_range()
            .map_err(|e| GpuError::Device(format!("readback: {e}")))?;
        let out = bytemuck::cast_slice::<u8, T>(&view).to_vec();
        drop(view);
        staging.unmap();
        Ok(out)
    }

    fn storage(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: data,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            })
    }
}

/// The shape of a config the device kernel runs.
#[derive(Clone, Debug)]
pub struct Shape {
    pub obs: usize,
    pub actions: usize,
    pub hidden: usize,
    /// The env's device kernel.
    pub env: envs::DeviceEnv,
    /// The episode's time limit, with the config's env args applied.
    pub max_steps: u32,
}

impl Shape {
    /// Parameters of the critic, and of critic and actor together (`Agent::params`).
    fn param_counts(&self) -> (usize, usize) {
        let (h, obs, act) = (self.hidden, self.obs, self.actions);
        let critic = obs * h + h + h * h + h + h + 1;
        (critic, critic + obs * h + h + h * h + h + h * act + act)
    }
}

/// Whether the device path runs `cfg`, and with which shape; the error names the
/// first setting it does not support.
pub fn check(cfg: &PpoConfig) -> Result<Shape, GpuError> {
    cfg.validate()?;
    if !PPO_ENVS.contains(&cfg.env.as_str()) {
        return Err(GpuError::Unsupported(format!(
            "env {}: not on the device yet (device envs: {})",
            cfg.env,
            PPO_ENVS.join(", ")
        )));
    }
    let env = envs::device_env(&cfg.env)?;
    let mut max_steps = env.max_episode_steps;
    for (k, v) in &cfg.env_args {
        match k.as_str() {
            "max_episode_steps" => {
                max_steps = rlrig_env::envs::steps_param(v).map_err(|e| {
                    GpuError::Unsupported(format!("env arg max_episode_steps={v}: {e}"))
                })?;
            }
            _ => {
                return Err(GpuError::Unsupported(format!(
                    "env arg {k}: the device envs run their default parameters (only \
                     max_episode_steps can be set)"
                )));
            }
        }
    }
    let h = match cfg.hidden.as_slice() {
        [a, b] if a == b => *a,
        other => {
            return Err(GpuError::Unsupported(format!(
                "hidden = {other:?}: the device path runs two equal hidden layers"
            )));
        }
    };
    if !h.is_power_of_two() || !(4..=128).contains(&h) {
        return Err(GpuError::Unsupported(format!(
            "hidden = [{h}, {h}]: the device path needs a power of two from 4 to 128"
        )));
    }
    let unsupported = [
        ("conv_channels", cfg.conv_channels != 0),
        ("cnn", !cfg.cnn.is_empty()),
        ("reward_sign", cfg.reward_sign),
        ("norm_obs", cfg.norm_obs),
        ("norm_reward", cfg.norm_reward),
        ("vtrace", cfg.vtrace),
        (
            "policy_lag or actors (IMPALA's collection)",
            cfg.collection() != Collection::OnPolicy,
        ),
        ("optimizer (only adam)", cfg.optimizer != Optimizer::Adam),
        (
            "activation (only tanh)",
            cfg.activation != MlpActivation::Tanh,
        ),
    ];
    if let Some((name, _)) = unsupported.iter().find(|(_, on)| *on) {
        return Err(GpuError::Unsupported(format!(
            "{name}: not supported on the device path yet"
        )));
    }
    if cfg.batch_size() > 16_384 {
        return Err(GpuError::Unsupported(format!(
            "num_envs x num_steps = {}: the device path holds a run's rollout indices in \
             workgroup memory, at most 16384 rows",
            cfg.batch_size()
        )));
    }
    Ok(Shape {
        obs: env.obs,
        actions: env.discrete().expect("PPO_ENVS are discrete") as usize,
        hidden: h,
        env,
        max_steps,
    })
}

/// Metrics of one iteration of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IterStats {
    /// Episodes that ended during the rollout.
    pub episodes: f64,
    /// Their mean return and length (NaN when none ended).
    pub mean_return: f64,
    pub mean_length: f64,
    pub pg_loss: f64,
    pub v_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clipfrac: f64,
}

/// Device time of an iteration's kernels ([`ResidentPpo::profile`]), in seconds summed
/// over `iterations`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelTimes {
    /// Rollout, GAE and update kernels.
    pub kernels: [f64; 3],
    /// From the end of one dispatch to the start of the next within an iteration.
    pub between: f64,
    pub dispatches: u64,
    pub iterations: u64,
}

/// How the kernels are laid out (speed; see each field for its effect on results).
/// [`Tuning::for_run`] picks the fastest measured (BENCHMARKS.md); the default is the
/// simplest: 16-row passes where they fit, looped products, one thread per hidden unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// Rows of a minibatch per pass through the networks (None: the most the device's
    /// workgroup memory holds, up to 16). Changes the order of float sums.
    pub rows: Option<usize>,
    /// Products over hidden units written out in full rather than looped (more code,
    /// gradients in registers). The same operations in the same order; a driver may
    /// still fuse multiply-adds differently in the two forms.
    pub unroll_units: bool,
    /// Threads per hidden unit (1, 2 or 4): each takes every `split`-th row of a pass
    /// and a `1 / split` share of the unit's weight gradients, so a run's workgroup has
    /// `2 x hidden x split` threads and each thread a shorter chain of dependent work.
    /// Every row's sums keep their order; the gradient norm's tree sum follows the
    /// workgroup size (last bits of a run).
    pub split: usize,
    /// One dispatch for an iteration's whole rollout and one for all its minibatch
    /// updates (3 per iteration instead of 21 for CleanRL's CartPole settings), else
    /// at most 32 rollout steps and one update per dispatch (Mesa's lavapipe cut long
    /// dispatches short). The same operations in the same order: the same bits.
    pub fused: bool,
    /// Both networks' second and output layers' weights copied into workgroup memory
    /// at the start of every dispatch and minibatch update and read from there (when
    /// they fit beside the rest: 33.5 KB for 64 units). The same values: the same bits.
    pub shared_weights: bool,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            rows: None,
            unroll_units: false,
            split: 1,
            fused: false,
            shared_weights: false,
        }
    }
}

impl Tuning {
    /// The fastest layout measured for `runs` runs on `gpu` (H200, `examples/sweep.rs`,
    /// BENCHMARKS.md, 2026-11-27): one run is latency-bound and gains from 16-row passes
    /// with looped products (200 iterations: 0.77 s against 1.00 s for 8 rows written
    /// out), many runs are throughput-bound and gain from 8-row passes with the products
    /// written out (1,024 runs: 5.0 s against 6.3 s); both gain from fused dispatches
    /// (0.71 s, 4.6 s). The switch at 256 runs lies between the measured 1 and 1,024.
    /// CPU adapters (Mesa's lavapipe) keep short dispatches, which it needs, and loop:
    /// they compile the written-out kernels for minutes.
    pub fn for_run(gpu: &Gpu, runs: usize) -> Tuning {
        let gpu_here = gpu.info.device_type != wgpu::DeviceType::Cpu;
        let many = runs >= 256 && gpu_here;
        Tuning {
            rows: many.then_some(8),
            unroll_units: many,
            fused: gpu_here,
            ..Tuning::default()
        }
    }
}

/// `SPLITxROWS`, then `u` for written-out products, `w` for weights in workgroup memory
/// and `f` for fused dispatches (`4x16`, `2x8u`, `1x8wf`): the layout as `--gpu-layout`
/// and the sweep example name it.
impl std::fmt::Display for Tuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x", self.split)?;
        match self.rows {
            Some(r) => write!(f, "{r}")?,
            None => write!(f, "auto")?,
        }
        if self.unroll_units {
            write!(f, "u")?;
        }
        if self.shared_weights {
            write!(f, "w")?;
        }
        if self.fused {
            write!(f, "f")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Tuning {
    type Err = String;

    /// Parses [`Tuning`]'s `Display` form; the numbers are checked against a config
    /// and device when the kernels are built.
    fn from_str(text: &str) -> Result<Tuning, String> {
        let bad = |why: &str| {
            format!(
                "layout '{text}': {why} (expected SPLITxROWS, then 'u' for written-out \
                 products, 'w' for weights in workgroup memory and 'f' for fused dispatches \
                 if wanted, e.g. 4x16, 2x8u or 1x8wf)"
            )
        };
        // The flags, last first: `f`, then `w`, then `u`.
        let mut body = text;
        let mut flag = |c: char| {
            let found = body.strip_suffix(c);
            body = found.unwrap_or(body);
            found.is_some()
        };
        let (fused, shared_weights, unroll_units) = (flag('f'), flag('w'), flag('u'));
        let (split, rows) = body.split_once('x').ok_or_else(|| bad("no 'x'"))?;
        let split: usize = split
            .parse()
            .ok()
            .filter(|&s| s >= 1)
            .ok_or_else(|| bad("SPLIT is not a whole number from 1"))?;
        let rows = match rows {
            "auto" => None,
            r => Some(
                r.parse()
                    .ok()
                    .filter(|&r: &usize| r >= 1)
                    .ok_or_else(|| bad("ROWS is not a whole number from 1 (or auto)"))?,
            ),
        };
        Ok(Tuning {
            rows,
            unroll_units,
            split,
            fused,
            shared_weights,
        })
    }
}

/// Many PPO runs training side by side on one device.
pub struct ResidentPpo<'g> {
    gpu: &'g Gpu,
    pub cfg: PpoConfig,
    pub seeds: Vec<u64>,
    pub shape: Shape,
    /// The kernels' layout, with the rows per pass it resolved to.
    pub tuning: Tuning,
    /// The rollout (TS steps), GAE and update (one minibatch) kernels.
    kernels: [wgpu::ComputePipeline; 3],
    /// Dispatches of each kernel per iteration.
    per_iteration: [u32; 3],
    bind: wgpu::BindGroup,
    params: wgpu::Buffer,
    metrics: wgpu::Buffer,
    rollout: wgpu::Buffer,
    num_params: usize,
    iteration: u64,
}

fn wgsl_f32(x: f64) -> String {
    let v = x as f32;
    if v.is_finite() {
        format!("{v:?}")
    } else {
        "0.0".into()
    }
}

impl<'g> ResidentPpo<'g> {
    /// Runs for `seeds`, each initialised as rlrig's CPU path initialises that seed
    /// (same networks, same first env states), with the kernels laid out as `tuning`.
    pub fn new(
        gpu: &'g Gpu,
        cfg: &PpoConfig,
        seeds: &[u64],
        tuning: &Tuning,
    ) -> Result<ResidentPpo<'g>, GpuError> {
        let rows = tuning.rows;
        let shape = check(cfg)?;
        if seeds.is_empty() {
            return Err(GpuError::Unsupported("no seeds to train".into()));
        }
        let limits = gpu.device.limits();
        if seeds.len() > limits.max_compute_workgroups_per_dimension as usize {
            return Err(GpuError::Unsupported(format!(
                "{} seeds: this device runs at most {} in one launch",
                seeds.len(),
                limits.max_compute_workgroups_per_dimension
            )));
        }
        let (h, obs, act) = (shape.hidden, shape.obs, shape.actions);
        let (nenv, t) = (cfg.num_envs, cfg.num_steps);
        let b = nenv * t;
        let mb = cfg.minibatch_size();
        let split = tuning.split;
        let wg = 2 * h * split;
        if !split.is_power_of_two() || !(h / 4).is_multiple_of(split) {
            return Err(GpuError::Unsupported(format!(
                "split = {split}: must be a power of two dividing the hidden units / 4 ({})",
                h / 4
            )));
        }
        if wg > limits.max_compute_invocations_per_workgroup as usize
            || wg > limits.max_compute_workgroup_size_x as usize
        {
            return Err(GpuError::Unsupported(format!(
                "split = {split}: {wg} threads per workgroup, this device runs at most {}",
                limits.max_compute_invocations_per_workgroup
            )));
        }
        // Bytes of ppo.wgsl's workgroup arrays with r rows per pass (the rollout's
        // RE <= r envs per pass counted as r).
        let weights = if tuning.shared_weights {
            2 * h * h + h * (1 + act)
        } else {
            1
        };
        let shared = |r: usize| {
            4 * (r * obs + 6 * r * h + 2 * r * (act + 1) + b + mb + nenv + weights)
                + 4 * (5 * r + r * obs + r + 1)
        };
        let fits = |r: usize| {
            mb.is_multiple_of(r)
                && r.is_multiple_of(split)
                && shared(r) <= limits.max_compute_workgroup_storage_size as usize
        };
        let rows = match rows {
            Some(r) if r >= 1 && fits(r) => r,
            Some(r) => {
                return Err(GpuError::Unsupported(format!(
                    "rows = {r}: must divide the minibatch ({mb}), be a multiple of split \
                     ({split}) and fit workgroup memory"
                )));
            }
            None => [16, 8, 4, 2, 1]
                .into_iter()
                .find(|&r| fits(r))
                .ok_or_else(|| {
                    GpuError::Unsupported(format!(
                        "this device's workgroup memory ({} bytes) is too small for a \
                         {b}-row rollout",
                        limits.max_compute_workgroup_storage_size
                    ))
                })?,
        };
        let re = (1..=rows.min(nenv))
            .rev()
            .find(|r| nenv.is_multiple_of(*r) && r.is_multiple_of(split))
            .ok_or_else(|| {
                GpuError::Unsupported(format!(
                    "split = {split}: the rollout's {nenv} envs have no multiple of it that \
                     divides them"
                ))
            })?;

        let (_, num_params) = shape.param_counts();
        // Every buffer within what this device binds (else wgpu would fail later, as a
        // panic in its error handler rather than an error here).
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        for (what, bytes) in [
            ("weights", 4 * (seeds.len() * num_params) as u64),
            ("rollout", 4 * (seeds.len() * b * (obs + 7)) as u64),
            (
                "metrics",
                4 * (seeds.len() * cfg.num_iterations() as usize * NM) as u64,
            ),
        ] {
            if bytes > max {
                return Err(GpuError::Unsupported(format!(
                    "{} runs need a {} MB {what} buffer; this device binds at most {} MB per \
                     buffer: train fewer seeds per launch",
                    seeds.len(),
                    bytes / 1_000_000,
                    max / 1_000_000
                )));
            }
        }
        // Initial state on the host, as the CPU path makes it.
        let spec = rlrig_env::spec(&cfg.env)?;
        let mut params = Vec::new();
        let mut envs = Vec::new();
        let mut runs: Vec<u32> = Vec::new();
        let envw = shape.env.state + ENV_EXTRA;
        for &seed in seeds {
            let mut rng = Rng::stream(seed, Purpose::Init, 0);
            let agent = Agent::for_config(&spec, cfg, &mut rng);
            if agent.params.len() != num_params {
                return Err(GpuError::Unsupported(format!(
                    "internal: {} parameters, the kernel expects {num_params}",
                    agent.params.len()
                )));
            }
            params.extend_from_slice(&agent.params);
            // The first env states as the CPU path's executor draws them (stream
            // (seed, Env, e)), rounded to the device's f32.
            let first = rlrig_env::make_sync(
                &cfg.env,
                VecConfig::new(nenv)
                    .seed(seed)
                    .env_args(cfg.env_args.clone().into_iter().collect()),
            )?
            .snapshot();
            for state in &first.states {
                envs.extend(state[..shape.env.state].iter().map(|&x| x as f32));
                envs.extend_from_slice(&[0.0; ENV_EXTRA]);
            }
            // The device's random streams are keyed by (run key, stream, counters).
            let key = Rng::stream(seed, Purpose::Policy, u64::MAX).next_u32();
            runs.extend_from_slice(&[key, 0, 0, 0]);
        }
        let iters = cfg.num_iterations();
        let s = seeds.len();
        // Rollout steps and minibatch updates per dispatch: long dispatches are cut
        // short on some drivers (unless the layout fuses them).
        let updates = cfg.update_epochs * cfg.num_minibatches;
        let (ts, upd) = if tuning.fused {
            (t, updates)
        } else {
            let ts = (1..=t.min(32))
                .rev()
                .find(|d| t.is_multiple_of(*d))
                .expect("1 divides");
            (ts, 1)
        };
        let src = constants(
            cfg,
            &shape,
            rows,
            re,
            (ts, upd),
            (tuning.split, tuning.shared_weights),
        );
        let src = kernel_source(&src, &shape, rows, re, tuning);
        let module = shader(gpu, &src)?;
        let storage = |binding: u32| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        const BINDINGS: [u32; 8] = [0, 1, 2, 3, 4, 5, 6, 8];
        let entries: Vec<_> = BINDINGS.iter().map(|&b| storage(b)).collect();
        let layout = gpu
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("ppo"),
                entries: &entries,
            });
        let pl = gpu
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("ppo"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let kernels = [
            pipeline(gpu, &module, Some(&pl), "rollout")?,
            pipeline(gpu, &module, Some(&pl), "gae")?,
            pipeline(gpu, &module, Some(&pl), "update")?,
        ];
        let per_iteration = [(t / ts) as u32, 1, (updates / upd) as u32];

        let zeros = vec![0.0f32; params.len()];
        let pbuf = gpu.storage("params", bytemuck::cast_slice(&params));
        let m = gpu.storage("adam_m", bytemuck::cast_slice(&zeros));
        let v = gpu.storage("adam_v", bytemuck::cast_slice(&zeros));
        let ebuf = gpu.storage("envs", bytemuck::cast_slice(&envs));
        let roll = gpu.storage(
            "rollout",
            bytemuck::cast_slice(&vec![0.0f32; s * b * (obs + 7)]),
        );
        let metrics = gpu.storage(
            "metrics",
            bytemuck::cast_slice(&vec![0.0f32; (s * iters as usize * NM).max(1)]),
        );
        let rbuf = gpu.storage("runs", bytemuck::cast_slice(&runs));
        let order = gpu.storage("order", bytemuck::cast_slice(&vec![0u32; s * b]));
        debug_assert_eq!(envs.len(), s * nenv * envw);
        let bind = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("ppo"),
            layout: &layout,
            entries: &[&pbuf, &m, &v, &ebuf, &roll, &metrics, &rbuf, &order]
                .iter()
                .zip(BINDINGS)
                .map(|(b, binding)| wgpu::BindGroupEntry {
                    binding,
                    resource: b.as_entire_binding(),
                })
                .collect::<Vec<_>>(),
        });
        Ok(ResidentPpo {
            gpu,
            cfg: cfg.clone(),
            seeds: seeds.to_vec(),
            shape,
            tuning: Tuning {
                rows: Some(rows),
                ..tuning.clone()
            },
            kernels,
            per_iteration,
            bind,
            params: pbuf,
            metrics,
            rollout: roll,
            num_params,
            iteration: 0,
        })
    }

    /// Iterations done.
    pub fn iteration(&self) -> u64 {
        self.iteration
    }

    pub fn num_iterations(&self) -> u64 {
        self.cfg.num_iterations()
    }

    /// Runs up to `n` more iterations of every run (one dispatch each, one submission)
    /// and waits for them.
    pub fn run(&mut self, n: u64) -> Result<u64, GpuError> {
        let n = n.min(self.num_iterations() - self.iteration);
        if n == 0 {
            return Ok(0);
        }
        let mut enc = self.gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_bind_group(0, &self.bind, &[]);
            for _ in 0..n {
                for (k, &times) in self.kernels.iter().zip(&self.per_iteration) {
                    pass.set_pipeline(k);
                    for _ in 0..times {
                        pass.dispatch_workgroups(self.seeds.len() as u32, 1, 1);
                    }
                }
            }
        }
        self.gpu.queue.submit([enc.finish()]);
        self.gpu.wait()?;
        self.iteration += n;
        Ok(n)
    }

    /// Runs up to `n` more iterations with a GPU timestamp before and after every
    /// dispatch (each in its own pass, one submission per iteration): the device time of
    /// the rollout, GAE and update kernels, and the time between dispatches, in seconds
    /// summed over the iterations. An error where the adapter has no timestamps.
    pub fn profile(&mut self, n: u64) -> Result<KernelTimes, GpuError> {
        if !self
            .gpu
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return Err(GpuError::Unsupported(format!(
                "{} has no timestamp queries",
                self.gpu.describe()
            )));
        }
        let n = n.min(self.num_iterations() - self.iteration);
        let dispatches: u32 = self.per_iteration.iter().sum();
        let count = 2 * dispatches;
        let qs = self.gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let resolve = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile"),
            size: 8 * count as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let tick = self.gpu.queue.get_timestamp_period() as f64 * 1e-9;
        let mut out = KernelTimes::default();
        for _ in 0..n {
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            let mut q = 0;
            for (k, &times) in self.kernels.iter().zip(&self.per_iteration) {
                for _ in 0..times {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &qs,
                            beginning_of_pass_write_index: Some(q),
                            end_of_pass_write_index: Some(q + 1),
                        }),
                    });
                    pass.set_bind_group(0, &self.bind, &[]);
                    pass.set_pipeline(k);
                    pass.dispatch_workgroups(self.seeds.len() as u32, 1, 1);
                    q += 2;
                }
            }
            enc.resolve_query_set(&qs, 0..count, &resolve, 0);
            self.gpu.queue.submit([enc.finish()]);
            let ts = self.gpu.read::<u64>(&resolve, 2 * count as usize)?;
            let mut q = 0;
            for (kernel, &times) in self.per_iteration.iter().enumerate() {
                for _ in 0..times {
                    out.kernels[kernel] += ts[q + 1].saturating_sub(ts[q]) as f64 * tick;
                    if q > 0 {
                        out.between += ts[q].saturating_sub(ts[q - 1]) as f64 * tick;
                    }
                    q += 2;
                }
            }
            out.dispatches += dispatches as u64;
            self.iteration += 1;
            out.iterations += 1;
        }
        Ok(out)
    }

    /// Every run's parameters, in `Agent::params` layout.
    pub fn params(&self) -> Result<Vec<Vec<f32>>, GpuError> {
        let all = self
            .gpu
            .read::<f32>(&self.params, self.seeds.len() * self.num_params)?;
        Ok(all.chunks(self.num_params).map(<[f32]>::to_vec).collect())
    }

    /// Every run's last rollout: per row (step-major, then env) the observation,
    /// action, log-prob, value, reward, done flag, advantage and return.
    pub fn rollout(&self) -> Result<Vec<Vec<f32>>, GpuError> {
        let per = self.cfg.batch_size() * (self.shape.obs + 7);
        let all = self
            .gpu
            .read::<f32>(&self.rollout, self.seeds.len() * per)?;
        Ok(all.chunks(per).map(<[f32]>::to_vec).collect())
    }

    /// Every run's metrics for the iterations done.
    pub fn metrics(&self) -> Result<Vec<Vec<IterStats>>, GpuError> {
        let iters = self.num_iterations() as usize;
        let all = self
            .gpu
            .read::<f32>(&self.metrics, self.seeds.len() * iters * NM)?;
        let rows = self.cfg.minibatch_size() * self.cfg.num_minibatches * self.cfg.update_epochs;
        Ok(all
            .chunks(iters * NM)
            .map(|run| {
                run.chunks(NM)
                    .take(self.iteration as usize)
                    .map(|m| {
                        let m: Vec<f64> = m.iter().map(|&x| f64::from(x)).collect();
                        let per_row = |x: f64| x / rows as f64;
                        IterStats {
                            episodes: m[0],
                            mean_return: m[1] / m[0],
                            mean_length: m[2] / m[0],
                            pg_loss: per_row(m[3]),
                            v_loss: per_row(m[4]),
                            entropy: per_row(m[5]),
                            approx_kl: per_row(m[6]),
                            clipfrac: per_row(m[7]),
                        }
                    })
                    .collect()
            })
            .collect())
    }

    /// Agents with every run's current parameters, for rlrig's CPU evaluation.
    pub fn agents(&self) -> Result<Vec<Agent>, GpuError> {
        let spec = rlrig_env::spec(&self.cfg.env)?;
        // The networks' shapes once; each run's agent differs only in its parameters.
        let shapes = Agent::for_config(&spec, &self.cfg, &mut Rng::stream(0, Purpose::Init, 0));
        Ok(self
            .params()?
            .into_iter()
            .map(|params| Agent {
                params,
                ..shapes.clone()
            })
            .collect())
    }
}

/// The `const` lines of the kernel for `cfg` (shape `shape`) with `rows` rows per pass,
/// `re` envs per rollout pass, `ts` rollout steps and `upd` minibatch updates per
/// dispatch, `split` threads per hidden unit and whether weights are staged in
/// workgroup memory.
fn constants(
    cfg: &PpoConfig,
    shape: &Shape,
    rows: usize,
    re: usize,
    (ts, upd): (usize, usize),
    (split, shared_weights): (usize, bool),
) -> String {
    let (h, obs, act) = (shape.hidden, shape.obs, shape.actions);
    let (nenv, t) = (cfg.num_envs, cfg.num_steps);
    let (b, mb) = (cfg.batch_size(), cfg.minibatch_size());
    let iters = cfg.num_iterations();
    let (per_critic, num_params) = shape.param_counts();
    let consts = [
        ("OBS", obs.to_string() + "u"),
        ("ACT", act.to_string() + "u"),
        ("H", h.to_string() + "u"),
        ("NENV", nenv.to_string() + "u"),
        ("T", t.to_string() + "u"),
        ("B", b.to_string() + "u"),
        ("MB", mb.to_string() + "u"),
        ("NMB", cfg.num_minibatches.to_string() + "u"),
        ("EPOCHS", cfg.update_epochs.to_string() + "u"),
        ("R", rows.to_string() + "u"),
        ("RE", re.to_string() + "u"),
        ("TS", ts.to_string() + "u"),
        ("UPD", upd.to_string() + "u"),
        ("SPLIT", split.to_string() + "u"),
        ("W_SHARED", shared_weights.to_string()),
        ("ITERS", iters.to_string() + "u"),
        ("ANNEAL_ITERS", cfg.anneal_iterations().to_string() + "u"),
        ("P_CRITIC", per_critic.to_string() + "u"),
        ("P", num_params.to_string() + "u"),
        ("GAMMA", wgsl_f32(cfg.gamma)),
        ("LAMBDA", wgsl_f32(cfg.gae_lambda)),
        ("CLIP", wgsl_f32(cfg.clip_coef)),
        ("ENT_COEF", wgsl_f32(cfg.ent_coef)),
        ("VF_COEF", wgsl_f32(cfg.vf_coef)),
        ("MAX_GRAD_NORM", wgsl_f32(cfg.max_grad_norm)),
        ("LR", wgsl_f32(cfg.learning_rate)),
        ("ADAM_EPS", wgsl_f32(cfg.adam_eps)),
        ("ANNEAL_LR", cfg.anneal_lr.to_string()),
        ("NORM_ADV", cfg.norm_adv.to_string()),
        ("CLIP_VLOSS", cfg.clip_vloss.to_string()),
        ("BOOTSTRAP_TRUNCATED", cfg.bootstrap_truncated.to_string()),
    ];
    let mut src = String::new();
    for (name, value) in &consts {
        src += &format!("const {name} = {value};\n");
    }
    src
}

/// The kernel's WGSL after `consts` (the `const` lines of a config): the env, the PPO
/// iteration, and the forward pass for a minibatch chunk and for a rollout step.
fn kernel_source(consts: &str, shape: &Shape, rows: usize, env_rows: usize, t: &Tuning) -> String {
    let forward = |name: &str, marker: &str, count: &str| {
        FORWARD_WGSL
            .replace("forward_NAME", name)
            .replace("%ROWS", marker)
            .replace("ROWS", count)
    };
    let src = format!(
        "{consts}fn tanh_(x: f32) -> f32 {{ return tanh(clamp(x, -15.0, 15.0)); }}\n{}{}",
        shape.env.source(shape.max_steps),
        PPO_WGSL
            .replace("FORWARD_R", &forward("forward_r", "%R", "R"))
            .replace("FORWARD_E", &forward("forward_e", "%E", "RE"))
    );
    let units = unroll_units(&src, shape.hidden / 4, t.unroll_units, t.split);
    unroll_rows(&units, rows, env_rows, t.split)
}

/// The blocks between `%K{` and `%K}` lines, once per group of four hidden units
/// (`{kk}` = 0 .. h4), and between `%P{` and `%P}`, once per group of this thread's part
/// (`{kl}` = 0 .. h4 / split, `{kk}` = the group's index among all h4): written out, each
/// copy in its own scope, or as a loop.
fn unroll_units(src: &str, h4: usize, written_out: bool, split: usize) -> String {
    let mut out = String::with_capacity(src.len() * 4);
    // The open block: its marker (K or P) and its lines.
    let mut block: Option<(char, Vec<&str>)> = None;
    for line in src.lines() {
        let t = line.trim_start();
        match &mut block {
            None if t == "%K{" || t == "%P{" => block = Some((t.as_bytes()[1] as char, Vec::new())),
            Some((m, body)) if t.len() == 3 && t.starts_with('%') && t.ends_with('}') => {
                assert_eq!(t.as_bytes()[1] as char, *m, "unbalanced %{m}{{ block");
                let part = *m == 'P';
                let n = if part { h4 / split } else { h4 };
                let index = |kl: &str| {
                    if part {
                        format!("(p * KS + {kl})")
                    } else {
                        kl.to_string()
                    }
                };
                if written_out {
                    for k in 0..n {
                        let kl = format!("{k}u");
                        out.push_str("{\n");
                        for l in body.iter() {
                            out.push_str(&l.replace("{kk}", &index(&kl)).replace("{kl}", &kl));
                            out.push('\n');
                        }
                        out.push_str("}\n");
                    }
                } else {
                    out.push_str(&format!("for (var kl = 0u; kl < {n}u; kl++) {{\n"));
                    out.push_str(&format!("let kk = {};\n", index("kl")));
                    for l in body.iter() {
                        out.push_str(&l.replace("{kk}", "kk").replace("{kl}", "kl"));
                        out.push('\n');
                    }
                    out.push_str("}\n");
                }
                block = None;
            }
            Some((_, body)) => body.push(line),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    assert!(block.is_none(), "a %K{{ or %P{{ block is not closed");
    out
}

/// Writes each line that starts with `%R` (`%E`) out once per row of a pass over `rows`
/// (`env_rows`) rows that this thread's part computes (rows p, p + split, ...): `{r}u`
/// becomes that row's index and `{r}` its number among the part's rows, so per-row
/// values are separate scalars, not an array. Lines starting `%A` are written out once
/// per row of the pass, `{a}` = 0, 1, ...
fn unroll_rows(src: &str, rows: usize, env_rows: usize, split: usize) -> String {
    let mut out = String::with_capacity(src.len() * 2);
    for line in src.lines() {
        let (n, body, all) = if let Some(b) = line.strip_prefix("%R") {
            (rows, b, false)
        } else if let Some(b) = line.strip_prefix("%E") {
            (env_rows, b, false)
        } else if let Some(b) = line.strip_prefix("%A") {
            (rows, b, true)
        } else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        if all {
            for a in 0..n {
                out.push_str(&body.replace("{a}", &a.to_string()));
                out.push('\n');
            }
        } else {
            for l in 0..n / split {
                let row = format!("({l}u * SPLIT + p)");
                out.push_str(&body.replace("{r}u", &row).replace("{r}", &l.to_string()));
                out.push('\n');
            }
        }
    }
    out
}

fn shader(gpu: &Gpu, src: &str) -> Result<wgpu::ShaderModule, GpuError> {
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = gpu
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("rlrig-gpu"),
            source: wgpu::ShaderSource::Wgsl(src.into()),
        });
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(GpuError::Kernel(e.to_string()));
    }
    Ok(module)
}

fn pipeline(
    gpu: &Gpu,
    module: &wgpu::ShaderModule,
    layout: Option<&wgpu::PipelineLayout>,
    entry: &str,
) -> Result<wgpu::ComputePipeline, GpuError> {
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let p = gpu
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout,
            module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[],
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(GpuError::Kernel(format!("{entry}: {e}")));
    }
    Ok(p)
}

/// Copy rates between host memory and the device through wgpu, in MB/s (10^6 bytes/s):
/// the best of several rounds of one buffer each way (issue 28: a rig on x1 risers
/// learns from rlrig itself which work to keep on the host).
#[derive(Clone, Debug, PartialEq)]
pub struct CopyRates {
    pub bytes: usize,
    pub rounds: usize,
    pub host_to_device_mb_s: f64,
    pub device_to_host_mb_s: f64,
}

/// Times `rounds` host-to-device writes (`queue.write_buffer` until the device has it)
/// and device-to-host reads (a copy to a mappable buffer, mapped, copied out) of a
/// `bytes`-byte buffer (rounded up to 4 bytes), keeping the fastest of each.
pub fn copy_rates(gpu: &Gpu, bytes: usize, rounds: usize) -> Result<CopyRates, GpuError> {
    let words = bytes.div_ceil(4).max(1);
    let data: Vec<u32> = (0..words as u32).collect();
    let buf = gpu.storage("copy", bytemuck::cast_slice(&vec![0u32; words]));
    let (mut up, mut down) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..rounds.max(1) {
        let t = std::time::Instant::now();
        gpu.queue.write_buffer(&buf, 0, bytemuck::cast_slice(&data));
        gpu.queue.submit([]);
        gpu.wait()?;
        up = up.min(t.elapsed().as_secs_f64());
        let t = std::time::Instant::now();
        let back = gpu.read::<u32>(&buf, words)?;
        down = down.min(t.elapsed().as_secs_f64());
        if back != data {
            return Err(GpuError::Unsupported(
                "GPU copy: the buffer read back differs from the one written".into(),
            ));
        }
    }
    let mb = (4 * words) as f64 / 1e6;
    Ok(CopyRates {
        bytes: 4 * words,
        rounds: rounds.max(1),
        host_to_device_mb_s: mb / up,
        device_to_host_mb_s: mb / down,
    })
}

#[cfg(test)]
mod tests {
    use super::Tuning;
    use proptest::prelude::*;

    #[test]
    fn layouts_parse_and_print() {
        let t: Tuning = "4x16u".parse().unwrap();
        assert_eq!(
            t,
            Tuning {
                rows: Some(16),
                unroll_units: true,
                split: 4,
                fused: false,
                shared_weights: false,
            }
        );
        let f: Tuning = "1x8uwf".parse().unwrap();
        assert!(f.fused && f.unroll_units && f.shared_weights && f.rows == Some(8));
        assert_eq!(f.to_string(), "1x8uwf");
        assert_eq!("1xauto".parse::<Tuning>().unwrap(), Tuning::default());
        for bad in [
            "", "4", "x16", "0x16", "4x0", "4x16uu", "4x16fu", "4x16wu", "4x16fw", "-1x8", "4x16 ",
        ] {
            let e = bad.parse::<Tuning>().unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    proptest! {
        #[test]
        fn a_printed_layout_parses_back(split in 1usize..64, rows in proptest::option::of(1usize..256), u: bool, fused: bool, w: bool) {
            let t = Tuning { rows, unroll_units: u, split, fused, shared_weights: w };
            prop_assert_eq!(t.to_string().parse::<Tuning>().unwrap(), t);
        }

        #[test]
        fn any_text_parses_or_is_an_error_naming_it(text in ".{0,12}") {
            if let Err(e) = text.parse::<Tuning>() {
                prop_assert!(e.contains(&text));
            }
        }
    }
}
