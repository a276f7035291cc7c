//! The envs as device kernels (issue 28): classic control in f32 WGSL, one thread per
//! env, with the dynamics of rlrig-env's CPU envs (which stay the reference: tests step
//! both from the same states and compare), a probe that steps given states, and a
//! stepping benchmark with random actions and auto-reset that runs whole batches of
//! steps per dispatch with every env's state in registers.

use crate::GpuError;
use crate::{Gpu, pipeline, shader, wgsl_f32};
use std::time::Instant;

pub(crate) const RNG_WGSL: &str = include_str!("rng.wgsl");
const ENVS_WGSL: &str = include_str!("envs.wgsl");

/// An env the device runs.
#[derive(Clone, Copy, Debug)]
pub struct DeviceEnv {
    pub id: &'static str,
    /// Floats of state (rlrig-env's `state_to_vec` order).
    pub state: usize,
    /// Observation length.
    pub obs: usize,
    /// Gymnasium's TimeLimit (u32::MAX: none).
    pub max_episode_steps: u32,
    pub action: DeviceAction,
    wgsl: &'static str,
}

/// An env's action space on the device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceAction {
    /// `n` actions, as an index.
    Discrete(u32),
    /// One continuous action, drawn uniformly from `[low, high)` by the bench (the env
    /// clips what it is given itself, as the reference does).
    Box { low: f32, high: f32 },
}

/// Every env with a device kernel.
pub const DEVICE_ENVS: &[DeviceEnv] = &[
    DeviceEnv {
        id: "CartPole-v1",
        state: 4,
        obs: 4,
        max_episode_steps: 500,
        action: DeviceAction::Discrete(2),
        wgsl: include_str!("envs/cartpole.wgsl"),
    },
    DeviceEnv {
        id: "Acrobot-v1",
        state: 4,
        obs: 6,
        max_episode_steps: 500,
        action: DeviceAction::Discrete(3),
        wgsl: include_str!("envs/acrobot.wgsl"),
    },
    DeviceEnv {
        id: "MountainCar-v0",
        state: 2,
        obs: 2,
        max_episode_steps: 200,
        action: DeviceAction::Discrete(3),
        wgsl: include_str!("envs/mountain_car.wgsl"),
    },
    DeviceEnv {
        id: "MountainCarContinuous-v0",
        state: 2,
        obs: 2,
        max_episode_steps: 999,
        action: DeviceAction::Box {
            low: -1.0,
            high: 1.0,
        },
        wgsl: include_str!("envs/mountain_car_continuous.wgsl"),
    },
    DeviceEnv {
        id: "MinAtar/Breakout-v1",
        state: 12,
        obs: 400,
        // No time limit (the game ends itself; a random policy in tens of steps).
        max_episode_steps: u32::MAX,
        action: DeviceAction::Discrete(3),
        wgsl: include_str!("envs/minatar_breakout.wgsl"),
    },
    DeviceEnv {
        id: "Pendulum-v1",
        state: 2,
        obs: 3,
        max_episode_steps: 200,
        action: DeviceAction::Box {
            low: -2.0,
            high: 2.0,
        },
        wgsl: include_str!("envs/pendulum.wgsl"),
    },
];

/// The device env named `id`, or an error listing those there are.
pub fn device_env(id: &str) -> Result<DeviceEnv, GpuError> {
    DEVICE_ENVS
        .iter()
        .find(|e| e.id == id)
        .copied()
        .ok_or_else(|| {
            GpuError::Unsupported(format!(
                "{id} has no device kernel (device envs: {})",
                DEVICE_ENVS
                    .iter()
                    .map(|e| e.id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

impl DeviceEnv {
    /// The env's WGSL with what it needs before it: the random streams and MAX_STEPS
    /// (`max_steps`, the episode's time limit).
    ///
    /// The sizes, the `Action` type and how an action is read from a float or drawn from
    /// a uniform number are written here from this description, so the WGSL files hold
    /// the dynamics alone.
    pub(crate) fn source(&self, max_steps: u32) -> String {
        let limit = if max_steps == u32::MAX {
            "3.0e38".to_string()
        } else {
            format!("{max_steps}.0")
        };
        let action = match self.action {
            DeviceAction::Discrete(n) => format!(
                "alias Action = u32;\n\
                 fn env_action(x: f32) -> Action {{ return u32(x); }}\n\
                 fn env_random_action(u: f32) -> Action {{ return min(u32(u * {n}.0), {}u); }}\n",
                n - 1
            ),
            DeviceAction::Box { low, high } => format!(
                "alias Action = f32;\n\
                 fn env_action(x: f32) -> Action {{ return x; }}\n\
                 fn env_random_action(u: f32) -> Action {{ return {} + {} * u; }}\n",
                wgsl_f32(low.into()),
                wgsl_f32((high - low).into())
            ),
        };
        format!(
            "const MAX_STEPS: f32 = {limit};\nconst ENV_STATE: u32 = {}u;\nconst ENV_OBS: u32 = {}u;\n\
             const PI: f32 = 3.14159265358979;\n{action}{RNG_WGSL}{}",
            self.state, self.obs, self.wgsl
        )
    }

    /// The number of actions of a discrete env.
    pub fn discrete(&self) -> Option<u32> {
        match self.action {
            DeviceAction::Discrete(n) => Some(n),
            DeviceAction::Box { .. } => None,
        }
    }
}

/// One probed transition: the device's next state, reward, terminated flag and
/// observation.
#[derive(Clone, Debug, PartialEq)]
pub struct Probed {
    pub state: Vec<f32>,
    pub reward: f32,
    pub terminated: bool,
    pub obs: Vec<f32>,
}

fn envs_module(gpu: &Gpu, env: &DeviceEnv, consts: &str) -> Result<wgpu::ShaderModule, GpuError> {
    let src = format!("{consts}{}{ENVS_WGSL}", env.source(env.max_episode_steps));
    shader(gpu, &src)
}

/// One device step of `env` from each of `states` (`env.state` floats each) with
/// `actions` (a discrete index as a float, or the continuous action) and `draws` (the
/// step's uniform draw in [0, 1): MinAtar's sticky action when below 0.1).
pub fn probe(
    gpu: &Gpu,
    env: &DeviceEnv,
    states: &[Vec<f32>],
    actions: &[f32],
    draws: &[f32],
) -> Result<Vec<Probed>, GpuError> {
    if states.len() != actions.len()
        || states.len() != draws.len()
        || states.iter().any(|s| s.len() != env.state)
    {
        return Err(GpuError::Unsupported(format!(
            "probe of {}: {} states of {} floats and as many actions and draws wanted",
            env.id,
            states.len(),
            env.state,
        )));
    }
    let module = envs_module(
        gpu,
        env,
        "const KEY: u32 = 0u;\nconst BENCH_STEPS: u32 = 1u;\n",
    )?;
    let pipe = pipeline(gpu, &module, None, "env_probe")?;
    let w = 2 * env.state + 4 + env.obs;
    let mut data = vec![0.0f32; states.len() * w];
    for (i, ((s, a), u)) in states.iter().zip(actions).zip(draws).enumerate() {
        data[i * w..i * w + env.state].copy_from_slice(s);
        data[i * w + env.state] = *a;
        data[i * w + env.state + 1] = *u;
    }
    let buf = gpu.storage("probe", bytemuck::cast_slice(&data));
    let bind = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("probe"),
        layout: &pipe.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: buf.as_entire_binding(),
        }],
    });
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipe);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(states.len().div_ceil(64) as u32, 1, 1);
    }
    gpu.queue.submit([enc.finish()]);
    let out = gpu.read::<f32>(&buf, data.len())?;
    let n = env.state;
    Ok(out
        .chunks(w)
        .map(|r| {
            let r = &r[n + 2..];
            Probed {
                state: r[..n].to_vec(),
                reward: r[n],
                terminated: r[n + 1] > 0.5,
                obs: r[n + 2..].to_vec(),
            }
        })
        .collect())
}

/// What [`bench`] measured.
#[derive(Clone, Debug)]
pub struct EnvBench {
    pub env: &'static str,
    pub num_envs: usize,
    /// Steps timed, all envs together, as the device counted them.
    pub steps: u64,
    pub seconds: f64,
    /// Random-action steps per env in one dispatch.
    pub steps_per_dispatch: u32,
    pub dispatches: u64,
    pub warmup_seconds: f64,
    /// Episodes finished over the whole run (warm-up included) and their mean return.
    pub episodes: u64,
    pub mean_return: f64,
}

impl EnvBench {
    pub fn steps_per_sec(&self) -> f64 {
        self.steps as f64 / self.seconds
    }
}

/// The largest env count one dispatch row covers (65,535 workgroups of 64).
const MAX_ENVS: usize = 65_535 * 64;

/// Random-action steps per env in one dispatch: about 2^24 steps of a classic-control
/// env over all envs together (fewer for envs whose observation is larger: MinAtar's
/// 400 floats cost ~25x a step of its game), so a dispatch lasts milliseconds on a GPU,
/// at most 4,096 per env and at least 8. Also at most 32,768 observation values per
/// env and dispatch: Mesa's llvmpipe (CI's adapter) ends a shader's loops after 65,535
/// iterations (its loop limiter), which cut Breakout's 400-value observation loop short
/// at 315 steps per dispatch; the step counts the host checks caught it.
pub fn bench_steps_per_dispatch(env: &DeviceEnv, num_envs: usize) -> u32 {
    let work = 1 + env.obs / 16;
    let k = ((1usize << 24) / (num_envs.max(1) * work)).min(32_768 / env.obs);
    k.clamp(8, 4096) as u32
}

/// Steps `num_envs` device envs with uniformly random actions and auto-reset (as
/// `rlrig bench env` does on the CPU) for at least `steps` steps after `warmup`
/// seconds of untimed stepping; the time runs from the first submission to the
/// device's completion of the last. `steps_per_dispatch` None picks
/// [`bench_steps_per_dispatch`].
pub fn bench(
    gpu: &Gpu,
    env: &DeviceEnv,
    num_envs: usize,
    steps: u64,
    seed: u64,
    warmup: f64,
    steps_per_dispatch: Option<u32>,
) -> Result<EnvBench, GpuError> {
    if num_envs == 0 || num_envs > MAX_ENVS {
        return Err(GpuError::Unsupported(format!(
            "--num-envs {num_envs}: the device bench runs 1 to {MAX_ENVS} envs"
        )));
    }
    let k = steps_per_dispatch.unwrap_or_else(|| bench_steps_per_dispatch(env, num_envs));
    if k == 0 {
        return Err(GpuError::Unsupported(
            "steps per dispatch must be at least 1".into(),
        ));
    }
    // The run's key: the seed folded to 32 bits, as the training kernel keys its runs.
    let key = (seed ^ (seed >> 32)) as u32;
    let module = envs_module(
        gpu,
        env,
        &format!("const KEY: u32 = {key}u;\nconst BENCH_STEPS: u32 = {k}u;\n"),
    )?;
    let init = pipeline(gpu, &module, None, "env_init")?;
    let step = pipeline(gpu, &module, None, "env_bench")?;
    let bw = env.state + 4;
    let state = gpu.storage("bench state", &vec![0u8; num_envs * bw * 4]);
    let count = gpu.storage("bench counts", &vec![0u8; num_envs * 2 * 4]);
    let bind = |p: &wgpu::ComputePipeline| {
        gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("bench"),
            layout: &p.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: state.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: count.as_entire_binding(),
                },
            ],
        })
    };
    let (bind_init, bind_step) = (bind(&init), bind(&step));
    let groups = num_envs.div_ceil(64) as u32;
    let submit = |first: bool, dispatches: u64| {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            if first {
                pass.set_pipeline(&init);
                pass.set_bind_group(0, &bind_init, &[]);
                pass.dispatch_workgroups(groups, 1, 1);
            }
            pass.set_pipeline(&step);
            pass.set_bind_group(0, &bind_step, &[]);
            for _ in 0..dispatches {
                pass.dispatch_workgroups(groups, 1, 1);
            }
        }
        gpu.queue.submit([enc.finish()]);
    };
    // Warm-up: the pipelines' first use, and the clocks up; at least one dispatch.
    let per_dispatch = num_envs as u64 * u64::from(k);
    let t0 = Instant::now();
    submit(true, 1);
    gpu.wait()?;
    let mut warm_dispatches = 1u64;
    while t0.elapsed().as_secs_f64() < warmup {
        let t = Instant::now();
        submit(false, 1);
        gpu.wait()?;
        warm_dispatches += 1;
        // Long dispatches (a slow adapter) end the warm-up sooner.
        if t.elapsed().as_secs_f64() > warmup {
            break;
        }
    }
    let warmup_seconds = t0.elapsed().as_secs_f64();
    let dispatches = steps.div_ceil(per_dispatch).max(1);
    // The device counts each env's steps in a u32.
    if (warm_dispatches + dispatches) * u64::from(k) > u64::from(u32::MAX) {
        return Err(GpuError::Unsupported(format!(
            "{steps} steps over {num_envs} envs is over 2^32 steps per env: use more envs"
        )));
    }
    // Submitted in command buffers of at most 64 dispatches, all before the wait.
    let t1 = Instant::now();
    let mut left = dispatches;
    while left > 0 {
        let n = left.min(64);
        submit(false, n);
        left -= n;
    }
    gpu.wait()?;
    let seconds = t1.elapsed().as_secs_f64();
    let counts = gpu.read::<u32>(&count, num_envs * 2)?;
    let states = gpu.read::<f32>(&state, num_envs * bw)?;
    let want = (warm_dispatches + dispatches) * u64::from(k);
    let done: u64 = counts.chunks(2).map(|c| u64::from(c[0])).sum();
    if counts.chunks(2).any(|c| u64::from(c[0]) != want) {
        return Err(GpuError::Unsupported(format!(
            "the device stepped {done} steps where {} were submitted: the adapter cut dispatches short",
            want * num_envs as u64
        )));
    }
    let episodes: u64 = counts.chunks(2).map(|c| u64::from(c[1])).sum();
    let returns: f64 = states.chunks(bw).map(|s| f64::from(s[env.state + 2])).sum();
    Ok(EnvBench {
        env: env.id,
        num_envs,
        steps: dispatches * per_dispatch,
        seconds,
        steps_per_dispatch: k,
        dispatches,
        warmup_seconds,
        episodes,
        mean_return: if episodes > 0 {
            returns / episodes as f64
        } else {
            f64::NAN
        },
    })
}
