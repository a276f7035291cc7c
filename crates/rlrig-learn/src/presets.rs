//! The learners' per-environment presets, as data: one TOML file under `presets/` per
//! `for_env` constructor (`ppo.toml`, `a2c.toml`, `impala.toml`, `offpolicy.toml`,
//! `dqn.toml`, `evolution.toml`), embedded in the crate. [`Presets::apply`] serialises a
//! base config to a TOML table, sets its `env`, merges the file's layers that apply to
//! the env over it, key by key, and deserialises the result (the configs deny unknown
//! fields, so a misspelt key is an error). The layers, in order:
//!
//! 1. the file's top-level keys: every env;
//! 2. its categories (`[atari]`, `[continuous]`, `[minatar]`, `[ga]`, ...), in the order
//!    the file's [`Presets`] lists them, where the category's test says the config
//!    belongs;
//! 3. its groups: sections with a list `envs = [...]` of the ids they apply to, and
//!    optionally `only = "category"`: then only where that category applies (SAC's
//!    own settings for an env that DDPG and TD3 share). Two groups that list one id may
//!    not set one key, so their order does not matter;
//! 4. the section named by the env id.
//!
//! A file that does not parse or a section that does not deserialise is a programmer
//! error, so [`Presets::apply`] panics on it; the tests below load every file for every
//! env id.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A category of a preset file: its section's name, and whether the base config the
/// layers go over, for an env id, belongs to it.
pub(crate) type Category<C> = (&'static str, fn(&C, &str) -> bool);

/// One preset file and its categories.
pub(crate) struct Presets<C: 'static> {
    /// The file's name under `presets/`, for messages.
    pub(crate) file: &'static str,
    pub(crate) text: &'static str,
    /// The file's categories, in layer order.
    pub(crate) categories: &'static [Category<C>],
}

/// A [`Presets`] of the file `presets/$file` (embedded), with its categories.
macro_rules! presets {
    ($file:literal, $categories:expr) => {
        $crate::presets::Presets {
            file: $file,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/presets/", $file)),
            categories: $categories,
        }
    };
}
pub(crate) use presets;

/// The key of a group section that lists its env ids.
const ENVS: &str = "envs";
/// The key of a group section that names the one category it applies to.
const ONLY: &str = "only";

impl<C: Serialize + DeserializeOwned> Presets<C> {
    /// `base` for `env`, with this file's layers for `env` merged over it.
    pub(crate) fn apply(&self, base: C, env: &str) -> C {
        let layers = self.layers(&base, env);
        let mut config = toml::Table::try_from(base).expect("a config serialises to TOML");
        config.insert("env".into(), env.into());
        for layer in layers {
            config.extend(layer);
        }
        config.try_into().unwrap_or_else(|e: toml::de::Error| {
            panic!("presets/{} for {env}: {}", self.file, e.message())
        })
    }

    /// The layers that apply to `base` for `env`, in order.
    fn layers(&self, base: &C, env: &str) -> Vec<toml::Table> {
        let (everywhere, sections) = self.parse();
        // The categories `base` belongs to, in layer order: their sections, and the
        // groups that name one of them in `only`.
        let belongs: Vec<&str> = self
            .categories
            .iter()
            .filter(|(_, belongs)| belongs(base, env))
            .map(|(name, _)| *name)
            .collect();
        let categories = belongs
            .iter()
            .filter_map(|name| sections.get(*name).cloned());
        let groups = sections.values().filter_map(|s| {
            let mut s = s.clone();
            let listed = s.remove(ENVS)?;
            let only = s.remove(ONLY);
            (listed.as_array()?.iter().any(|id| id.as_str() == Some(env))
                && only.is_none_or(|c| c.as_str().is_some_and(|c| belongs.contains(&c))))
            .then_some(s)
        });
        let own = sections
            .get(env)
            .filter(|s| !self.is_category(env) && !s.contains_key(ENVS))
            .cloned();
        std::iter::once(everywhere)
            .chain(categories)
            .chain(groups)
            .chain(own)
            .collect()
    }

    /// Whether `name` is one of the file's categories.
    fn is_category(&self, name: &str) -> bool {
        self.categories.iter().any(|(c, _)| *c == name)
    }

    /// The file: its top-level keys, and its sections by name.
    fn parse(&self) -> (toml::Table, std::collections::BTreeMap<String, toml::Table>) {
        let file: toml::Table = toml::from_str(self.text)
            .unwrap_or_else(|e| panic!("presets/{} does not parse: {e}", self.file));
        let mut everywhere = toml::Table::new();
        let mut sections = std::collections::BTreeMap::new();
        for (name, value) in file {
            match value {
                toml::Value::Table(section) => {
                    sections.insert(name, section);
                }
                value => {
                    everywhere.insert(name, value);
                }
            }
        }
        (everywhere, sections)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dqn::DqnConfig;
    use crate::evolution::{EvoConfig, Method};
    use crate::offpolicy::{Algo, OffPolicyConfig};
    use crate::ppo::PpoConfig;
    use rlrig_env::ENV_IDS;

    /// One file: every section is named by a known env id or category, or lists known
    /// env ids; every layer deserialises over the defaults; groups that share an id set
    /// different keys; and `for_env` (which applies the file) gives a config of every
    /// env id, for that id.
    fn check<C>(p: &Presets<C>, for_env: impl Fn(&str) -> C)
    where
        C: Serialize + DeserializeOwned + Default,
    {
        let (everywhere, sections) = p.parse();
        let defaults = toml::Table::try_from(C::default()).expect("defaults serialise");
        let deserialises = |what: &str, layer: &toml::Table| {
            let mut t = defaults.clone();
            t.extend(layer.clone());
            if let Err(e) = t.try_into::<C>() {
                panic!("presets/{}: {what}: {}", p.file, e.message());
            }
        };
        deserialises("the top-level keys", &everywhere);
        let mut groups = Vec::new();
        for (name, section) in &sections {
            let mut keys = section.clone();
            match keys.remove(ENVS) {
                Some(listed) => {
                    let ids: Vec<String> = listed
                        .as_array()
                        .unwrap_or_else(|| panic!("presets/{}: [{name}] envs: not a list", p.file))
                        .iter()
                        .map(|id| id.as_str().unwrap_or_default().to_string())
                        .collect();
                    for id in &ids {
                        assert!(
                            ENV_IDS.contains(&id.as_str()),
                            "presets/{}: [{name}] lists an unknown env id '{id}'",
                            p.file
                        );
                    }
                    assert!(
                        !ENV_IDS.contains(&name.as_str()) && !p.is_category(name),
                        "presets/{}: [{name}] lists envs but is an env id or category",
                        p.file
                    );
                    if let Some(only) = keys.remove(ONLY) {
                        assert!(
                            only.as_str().is_some_and(|c| p.is_category(c)),
                            "presets/{}: [{name}] only = {only}: not a category",
                            p.file
                        );
                    }
                    groups.push((name, ids, keys.clone()));
                }
                None => assert!(
                    ENV_IDS.contains(&name.as_str()) || p.is_category(name),
                    "presets/{}: [{name}] is neither an env id nor a category ({})",
                    p.file,
                    p.categories
                        .iter()
                        .map(|(c, _)| *c)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
            deserialises(&format!("[{name}]"), &keys);
        }
        for (i, (a, a_ids, a_keys)) in groups.iter().enumerate() {
            for (b, b_ids, b_keys) in &groups[i + 1..] {
                let shared = a_ids.iter().any(|id| b_ids.contains(id));
                let clash = a_keys.keys().find(|k| b_keys.contains_key(*k));
                assert!(
                    !shared || clash.is_none(),
                    "presets/{}: [{a}] and [{b}] share an env and both set {clash:?}",
                    p.file
                );
            }
        }
        for &env in ENV_IDS {
            let config = toml::Table::try_from(for_env(env)).expect("serialises");
            assert_eq!(config["env"].as_str(), Some(env), "presets/{}", p.file);
        }
    }

    #[test]
    fn every_preset_file_loads_for_every_env() {
        check(&crate::ppo::PPO_PRESETS, PpoConfig::for_env);
        check(&crate::ppo::A2C_PRESETS, PpoConfig::a2c_for_env);
        check(&crate::ppo::IMPALA_PRESETS, PpoConfig::impala_for_env);
        check(&crate::dqn::PRESETS, DqnConfig::for_env);
        for algo in [Algo::Ddpg, Algo::Td3, Algo::Sac] {
            check(&crate::offpolicy::PRESETS, |env| {
                OffPolicyConfig::for_env(algo, env)
            });
        }
        for method in [Method::Es, Method::Ga] {
            check(&crate::evolution::PRESETS, |env| {
                EvoConfig::for_env(method, env)
            });
        }
    }

    /// A typo in a preset is an error, not an ignored key.
    #[test]
    #[should_panic(expected = "unknown field `learning_rat`")]
    fn a_misspelt_key_is_an_error() {
        const P: Presets<DqnConfig> = Presets {
            file: "test.toml",
            text: "[CartPole-v1]\nlearning_rat = 1e-3\n",
            categories: &[],
        };
        P.apply(DqnConfig::default(), "CartPole-v1");
    }

    /// The layers' order: top-level keys, categories, groups, then the id's section.
    #[test]
    fn layers_go_from_general_to_the_env() {
        const P: Presets<DqnConfig> = Presets {
            file: "test.toml",
            text: "seed = 2\ntotal_steps = 1\nbatch_size = 1\nnum_envs = 1\n\
                   [cat]\ntotal_steps = 2\nbatch_size = 2\nnum_envs = 2\n\
                   [off]\nnum_envs = 9\n\
                   [group]\nenvs = [\"Acrobot-v1\"]\nbatch_size = 3\nnum_envs = 3\n\
                   [Acrobot-v1]\nnum_envs = 4\n",
            categories: &[("cat", |_, _| true), ("off", |_, _| false)],
        };
        let c = P.apply(DqnConfig::default(), "Acrobot-v1");
        assert_eq!(
            (c.seed, c.total_steps, c.batch_size, c.num_envs),
            (2, 2, 3, 4)
        );
        let other = P.apply(DqnConfig::default(), "CartPole-v1");
        assert_eq!((other.batch_size, other.num_envs), (2, 2));
    }

    /// A group with `only` applies where its category does, and nowhere else.
    #[test]
    fn a_group_with_only_follows_its_category() {
        const P: Presets<DqnConfig> = Presets {
            file: "test.toml",
            text: "[mine]\nenvs = [\"Acrobot-v1\"]\nonly = \"big\"\nbatch_size = 7\n",
            categories: &[("big", |c: &DqnConfig, _| c.num_envs > 1)],
        };
        let one = DqnConfig {
            num_envs: 1,
            ..DqnConfig::default()
        };
        let two = DqnConfig {
            num_envs: 2,
            ..DqnConfig::default()
        };
        assert_eq!(P.apply(two.clone(), "Acrobot-v1").batch_size, 7);
        let base = one.batch_size;
        assert_eq!(P.apply(one, "Acrobot-v1").batch_size, base);
        assert_ne!(base, 7);
        assert_ne!(P.apply(two, "CartPole-v1").batch_size, 7);
    }
}
