//! Resolving a run's config: the algorithm's defaults and per-env preset, then a
//! config file, `--set KEY=VALUE` and the flags, each over the last; the result must
//! validate.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use rlrig_learn::alphazero::AzConfig;
use rlrig_learn::dqn::DqnConfig;
use rlrig_learn::offpolicy::{Algo, OffPolicyConfig};
use rlrig_learn::ppo::PpoConfig;

use crate::train::{AzArgs, EnvFlags, PpoArgs, RunFlags};

pub(crate) fn parse_value(raw: &str) -> toml::Value {
    // A TOML literal if it is one (numbers, booleans, arrays), else a string.
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Defaults for the env, then the config file, then `--set`, then explicit flags.
pub(crate) fn resolve_config(a: &PpoArgs, label: &str) -> Result<PpoConfig> {
    let cfg: PpoConfig = resolve(a, label, "CartPole-v1", |env| {
        let d = match label {
            "a2c" => PpoConfig::a2c_for_env(env),
            "impala" => PpoConfig::impala_for_env(env),
            _ => PpoConfig::for_env(env),
        };
        toml::Table::try_from(d).context("default config")
    })?;
    if cfg.algo.name() != label {
        bail!(
            "config: algo = \"{}\" but this is `rlrig train {label}`",
            cfg.algo.name()
        );
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

pub(crate) fn resolve_offpolicy(a: &PpoArgs, algo: Algo) -> Result<OffPolicyConfig> {
    let cfg: OffPolicyConfig = resolve(a, algo.name(), "Pendulum-v1", |env| {
        toml::Table::try_from(OffPolicyConfig::for_env(algo, env)).context("default config")
    })?;
    if cfg.algo != algo {
        bail!(
            "config: algo = \"{}\" but this is `rlrig train {}`",
            cfg.algo.name(),
            algo.name()
        );
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

pub(crate) fn resolve_dqn(a: &PpoArgs) -> Result<DqnConfig> {
    let cfg: DqnConfig = resolve(a, "dqn", "CartPole-v1", |env| {
        toml::Table::try_from(DqnConfig::for_env(env)).context("default config")
    })?;
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

/// The config of type `C`: `defaults(env)`, then the config file, then `--set`, then
/// explicit flags; a bad key or value names its source.
pub(crate) fn resolve<C: serde::de::DeserializeOwned>(
    a: &PpoArgs,
    algo: &str,
    default_env: &str,
    defaults: impl Fn(&str) -> Result<toml::Table>,
) -> Result<C> {
    let flags = int_flags(&[
        ("seed", a.run.seed),
        ("total_steps", a.total_steps),
        ("num_envs", a.num_envs.map(|n| n as u64)),
    ]);
    let src = Sources::of_env_run(&a.env, &a.run, algo, flags);
    resolve_from(
        &src,
        default_env,
        |e| Ok(rlrig_env::spec(e).map(|_| ())?),
        defaults,
    )
}

/// The config file: `--config`, else on `--resume` with `--run-dir` the run's own
/// `config.toml`, so `rlrig train ALGO --run-dir DIR --resume` needs no other flag.
/// Only a run whose checkpoints are of the command's `algo`: another algorithm's
/// config would fail on its own keys before the clearer "this is a sac checkpoint, not
/// td3" error.
pub(crate) fn run_config(run: &RunFlags, algo: &str) -> Option<PathBuf> {
    run.config.clone().or_else(|| {
        let dir = run.run_dir.as_ref()?;
        let own = dir.join("config.toml");
        let same = rlrig_learn::run::RunDir::open(dir)
            .and_then(|d| d.algo())
            .is_ok_and(|a| a == algo);
        (run.resume && own.exists() && same).then_some(own)
    })
}

/// The integer flags that were given (`--seed`, `--total-steps`, ...), as the config
/// keys they set; they override the config file and `--set`.
pub(crate) fn int_flags(given: &[(&'static str, Option<u64>)]) -> Vec<(&'static str, toml::Value)> {
    given
        .iter()
        .filter_map(|&(key, v)| Some((key, toml::Value::Integer(v? as i64))))
        .collect()
}

/// Where a config comes from, lowest priority first after the defaults.
pub(crate) struct Sources<'a> {
    pub env: Option<&'a str>,
    /// The config file (see [`run_config`]).
    pub config: Option<PathBuf>,
    pub set: &'a [String],
    /// Explicit flags (`--seed` ...): highest priority.
    pub flags: Vec<(&'static str, toml::Value)>,
    /// `--env-arg KEY=VALUE`: over the config file's `[env_args]`, key by key.
    pub env_args: &'a [(String, String)],
}

impl<'a> Sources<'a> {
    /// The sources of an `algo` run trained on an env: its env flags, its config file
    /// ([`run_config`]), `--set`, then `flags`.
    pub(crate) fn of_env_run(
        env: &'a EnvFlags,
        run: &'a RunFlags,
        algo: &str,
        flags: Vec<(&'static str, toml::Value)>,
    ) -> Sources<'a> {
        Sources {
            env: env.id.as_deref(),
            config: run_config(run, algo),
            set: &run.set,
            flags,
            env_args: &env.args,
        }
    }
}

pub(crate) fn resolve_from<C: serde::de::DeserializeOwned>(
    a: &Sources<'_>,
    default_env: &str,
    check_env: impl Fn(&str) -> Result<()>,
    defaults: impl Fn(&str) -> Result<toml::Table>,
) -> Result<C> {
    let file: Option<toml::Table> = match &a.config {
        None => None,
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading config file '{}'", p.display()))?;
            Some(toml::from_str(&text).with_context(|| format!("config file '{}'", p.display()))?)
        }
    };
    let env = match (&a.env, file.as_ref().and_then(|f| f.get("env"))) {
        (Some(e), _) => e.to_string(),
        (None, Some(toml::Value::String(e))) => e.clone(),
        (None, Some(v)) => bail!("config file: env must be a string, got {v}"),
        (None, None) => default_env.to_string(),
    };
    check_env(&env)?;
    let defaults = defaults(&env)?;
    let mut table = defaults.clone();
    let file_src = a
        .config
        .as_ref()
        .map(|p| format!("config file '{}'", p.display()))
        .unwrap_or_default();
    // (key, value, where it came from), to name the source of a bad value.
    let mut given: Vec<(String, toml::Value, String)> = Vec::new();
    for (k, v) in file.into_iter().flatten() {
        given.push((k, v, file_src.clone()));
    }
    for kv in a.set {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--set '{kv}': expected KEY=VALUE"))?;
        given.push((
            k.trim().to_string(),
            parse_value(v.trim()),
            format!("--set {kv}"),
        ));
    }
    for (k, v, src) in &given {
        if !defaults.contains_key(k) {
            let known: Vec<&String> = defaults.keys().collect();
            bail!(
                "{src}: unknown key '{k}'; known keys: {}",
                known
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        // Check each value's type on its own so the error names the key.
        let mut one = defaults.clone();
        one.insert(k.clone(), v.clone());
        if let Err(e) = one.try_into::<C>() {
            bail!("{src}: key '{k}': {}", e.message());
        }
        table.insert(k.clone(), v.clone());
    }
    table.insert("env".into(), toml::Value::String(env));
    for (k, v) in &a.flags {
        table.insert(k.to_string(), v.clone());
    }
    if !a.env_args.is_empty() {
        let mut args = match table.remove("env_args") {
            Some(toml::Value::Table(t)) => t,
            None => toml::Table::new(),
            Some(v) => bail!("config: env_args must be a table of KEY = VALUE, got {v}"),
        };
        for (k, v) in a.env_args {
            args.insert(k.clone(), toml::Value::String(v.clone()));
        }
        table.insert("env_args".into(), toml::Value::Table(args));
    }
    table
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("config: {}", e.message()))
}

pub(crate) fn resolve_alphazero(a: &AzArgs) -> Result<AzConfig> {
    let flags = int_flags(&[
        ("seed", a.run.seed),
        ("iterations", a.iterations),
        ("simulations", a.simulations.map(|n| n as u64)),
        ("games", a.games.map(|n| n as u64)),
    ]);
    let src = Sources {
        env: a.env.as_deref(),
        config: run_config(&a.run, "alphazero"),
        set: &a.run.set,
        flags,
        env_args: &[],
    };
    let cfg: AzConfig = resolve_from(
        &src,
        "ConnectFour",
        |e| {
            if rlrig_env::games::GAME_IDS.contains(&e) {
                Ok(())
            } else {
                bail!(
                    "unknown game '{e}' for alphazero (known: {})",
                    rlrig_env::games::GAME_IDS.join(", ")
                )
            }
        },
        |env| {
            toml::Table::try_from(AzConfig {
                env: env.to_string(),
                ..AzConfig::default()
            })
            .context("default config")
        },
    )?;
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

/// Property-based fuzzing of the config a run is built from: a config file (random
/// text and mutations of a valid one), `--set KEY=VALUE` (known keys and unknown ones,
/// any value) and `--env-arg`, for every algorithm's config. Each case must give a clear
/// error or a config that validates, whose memory estimate is a number, and which
/// resolves again to itself from the `config.toml` a run writes; never a panic.
#[cfg(test)]
mod fuzz {
    use super::{Sources, resolve_from};
    use anyhow::Result;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use rlrig_learn::alphazero::AzConfig;
    use rlrig_learn::evolution::{EvoConfig, Method};
    use rlrig_learn::memory::Estimated;
    use rlrig_learn::offpolicy::{Algo, OffPolicyConfig};
    use rlrig_learn::ppo::PpoConfig;
    use serde::{Serialize, de::DeserializeOwned};

    /// `Fuzzed::check` and `Fuzzed::bytes` of a config: its own `validate` and
    /// `memory_estimate`.
    macro_rules! checked {
        () => {
            fn check(&self) -> Result<(), rlrig_learn::LearnError> {
                self.validate()
            }
            fn bytes(&self) -> f64 {
                self.memory_estimate().total()
            }
        };
    }

    /// One algorithm's config: its defaults, validation and memory estimate.
    trait Fuzzed: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug {
        fn defaults(kind: usize, env: &str) -> Self;
        fn check(&self) -> Result<(), rlrig_learn::LearnError>;
        fn bytes(&self) -> f64;
        fn envs() -> &'static [&'static str] {
            rlrig_env::ENV_IDS
        }
    }

    impl Fuzzed for PpoConfig {
        fn defaults(kind: usize, env: &str) -> Self {
            [
                PpoConfig::for_env,
                PpoConfig::a2c_for_env,
                PpoConfig::impala_for_env,
            ][kind % 3](env)
        }
        checked!();
    }

    impl Fuzzed for OffPolicyConfig {
        fn defaults(kind: usize, env: &str) -> Self {
            OffPolicyConfig::for_env([Algo::Ddpg, Algo::Td3, Algo::Sac][kind % 3], env)
        }
        checked!();
    }

    impl Fuzzed for EvoConfig {
        fn defaults(kind: usize, env: &str) -> Self {
            EvoConfig::for_env([Method::Es, Method::Ga][kind % 2], env)
        }
        checked!();
    }

    impl Fuzzed for AzConfig {
        fn defaults(_: usize, env: &str) -> Self {
            AzConfig {
                env: env.to_string(),
                ..AzConfig::default()
            }
        }
        checked!();
        fn envs() -> &'static [&'static str] {
            rlrig_env::games::GAME_IDS
        }
    }

    fn config(seed: u64) -> Config {
        Config {
            cases: 96,
            failure_persistence: None,
            rng_seed: RngSeed::Fixed(seed),
            ..Config::default()
        }
    }

    /// A value as typed after `=`: numbers of every size and sign, booleans, arrays,
    /// quoted and bare text.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => any::<i64>().prop_map(|x| x.to_string()),
            2 => (0u64..5000).prop_map(|x| x.to_string()),
            2 => any::<f64>().prop_map(|x| x.to_string()),
            1 => prop_oneof![Just("nan"), Just("inf"), Just("-inf"), Just("1e400"), Just("true")]
                .prop_map(str::to_string),
            1 => proptest::collection::vec(0i64..300, 0..4).prop_map(|v| format!("{v:?}")),
            1 => "\"[a-zA-Z0-9_-]{0,12}\"",
            2 => "\\PC{0,16}",
        ]
    }

    /// `--set` entries: mostly keys of the config, some unknown, some without `=`.
    fn sets(keys: Vec<String>) -> impl Strategy<Value = Vec<String>> {
        let entry = (any::<prop::sample::Index>(), 0u8..10, value()).prop_map(
            move |(k, how, v)| match how {
                0 => format!("no_such_key={v}"),
                1 => v,
                _ => format!("{}={v}", k.get(&keys)),
            },
        );
        proptest::collection::vec(entry, 0..4)
    }

    /// An edit of a config file's text: a byte replaced, a line dropped or repeated.
    fn edit_text(text: &str, edits: &[(prop::sample::Index, u8, char)]) -> String {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for (at, how, c) in edits {
            if lines.is_empty() {
                break;
            }
            let i = at.index(lines.len());
            match how % 3 {
                0 => {
                    let mut chars: Vec<char> = lines[i].chars().collect();
                    if !chars.is_empty() {
                        let j = at.index(chars.len());
                        chars[j] = *c;
                    }
                    lines[i] = chars.into_iter().collect();
                }
                1 => {
                    lines.remove(i);
                }
                _ => lines.insert(i, lines[i].clone()),
            }
        }
        lines.join("\n")
    }

    /// One fuzz case: the defaults (`kind`, `env`) it starts from, the config file's text
    /// (if any), and the `--set` and `--env-arg` flags.
    #[derive(Clone, Copy)]
    struct Case<'a> {
        kind: usize,
        env: &'a str,
        file: Option<&'a str>,
        set: &'a [String],
        env_args: &'a [(String, String)],
    }

    fn resolve_case<C: Fuzzed>(
        Case {
            kind,
            env,
            file,
            set,
            env_args,
        }: Case<'_>,
    ) -> Result<C> {
        static CASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("rlrig-fuzz-{}-{n}.toml", std::process::id()));
        if let Some(text) = file {
            std::fs::write(&path, text).unwrap();
        }
        let src = Sources {
            env: Some(env),
            config: file.map(|_| path.clone()),
            set,
            flags: Vec::new(),
            env_args,
        };
        let cfg = resolve_from(
            &src,
            env,
            |e| {
                if C::envs().contains(&e) {
                    Ok(())
                } else {
                    anyhow::bail!("unknown env '{e}'")
                }
            },
            |e| Ok(toml::Table::try_from(C::defaults(kind, e))?),
        );
        let _ = std::fs::remove_file(&path);
        cfg
    }

    /// The property for one case: an error with a message, or a config that either
    /// fails validation with a message or is usable and round-trips.
    fn check_case<C: Fuzzed>(case: Case<'_>) -> Result<(), TestCaseError> {
        let cfg = match resolve_case::<C>(case) {
            Ok(cfg) => cfg,
            Err(e) => {
                let msg = format!("{e:#}");
                prop_assert!(!msg.is_empty());
                return Ok(());
            }
        };
        if let Err(e) = cfg.check() {
            prop_assert!(
                matches!(
                    e,
                    rlrig_learn::LearnError::Config(_) | rlrig_learn::LearnError::Env(_)
                ),
                "{e:?}"
            );
            prop_assert!(!e.to_string().is_empty());
            return Ok(());
        }
        prop_assert!(cfg.bytes() >= 0.0, "estimate {} for {:?}", cfg.bytes(), cfg);
        // What the run writes as config.toml gives the same config back on --resume.
        let written = toml::to_string(&cfg).unwrap();
        let again = resolve_case::<C>(Case {
            file: Some(&written),
            set: &[],
            env_args: &[],
            ..case
        });
        prop_assert!(again.is_ok(), "{:?} from\n{}", again.err(), written);
        prop_assert_eq!(again.unwrap(), cfg);
        Ok(())
    }

    fn keys_of<C: Fuzzed>() -> Vec<String> {
        toml::Table::try_from(C::defaults(0, C::envs()[0]))
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    fn fuzz_sets<C: Fuzzed>(seed: u64) {
        let strategy = (
            0usize..3,
            any::<prop::sample::Index>(),
            sets(keys_of::<C>()),
            proptest::collection::vec(("[a-z_]{1,12}", value()), 0..2),
        );
        proptest::test_runner::TestRunner::new(config(seed))
            .run(&strategy, |(kind, env, set, env_args)| {
                check_case::<C>(Case {
                    kind,
                    env: C::envs()[env.index(C::envs().len())],
                    file: None,
                    set: &set,
                    env_args: &env_args,
                })
            })
            .unwrap();
    }

    fn fuzz_files<C: Fuzzed>(seed: u64) {
        let strategy = (
            0usize..3,
            any::<prop::sample::Index>(),
            proptest::collection::vec(
                (any::<prop::sample::Index>(), any::<u8>(), any::<char>()),
                0..5,
            ),
            "\\PC{0,64}",
            any::<bool>(),
        );
        proptest::test_runner::TestRunner::new(config(seed))
            .run(&strategy, |(kind, env, edits, noise, random)| {
                let env = *env.get(C::envs());
                let text = if random {
                    noise
                } else {
                    edit_text(&toml::to_string(&C::defaults(kind, env)).unwrap(), &edits)
                };
                check_case::<C>(Case {
                    kind,
                    env,
                    file: Some(&text),
                    set: &[],
                    env_args: &[],
                })
            })
            .unwrap();
    }

    /// For each learner's config, a test that fuzzes its `--set`/`--env-arg` flags and
    /// one that fuzzes its config files, each with its own proptest seed.
    macro_rules! never_panic {
        ($($config:ty: $sets:ident($sets_seed:expr), $files:ident($files_seed:expr);)*) => {$(
            #[test]
            fn $sets() {
                fuzz_sets::<$config>($sets_seed);
            }

            #[test]
            fn $files() {
                fuzz_files::<$config>($files_seed);
            }
        )*};
    }

    never_panic! {
        PpoConfig: ppo_set_and_env_args_never_panic(0xf00d_0001),
            ppo_config_files_never_panic(0xf00d_0002);
        OffPolicyConfig: offpolicy_set_and_env_args_never_panic(0xf00d_0003),
            offpolicy_config_files_never_panic(0xf00d_0004);
        EvoConfig: evolution_set_and_env_args_never_panic(0xf00d_0005),
            evolution_config_files_never_panic(0xf00d_0006);
        AzConfig: alphazero_set_and_env_args_never_panic(0xf00d_0007),
            alphazero_config_files_never_panic(0xf00d_0008);
    }
}
