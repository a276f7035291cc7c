//! MPI for `rlrig train`: when the binary is started by `mpirun` (and built with
//! `--features mpi`), the ranks share the run (see `rlrig_learn::collective`): ES/GA
//! split each generation's members, PPO, A2C, IMPALA, DQN and DDPG/TD3/SAC each
//! backward pass's row chunks, and PPO and A2C their envs. The same binary runs without MPI when not started by
//! mpirun.

use std::sync::Arc;

use anyhow::{Result, bail};
use rlrig_learn::collective::Collective;

/// Whether this process was started by an MPI launcher (Open MPI, MPICH/Hydra, PMIx).
pub fn under_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// What identifies a run across ranks: its resolved config and this binary.
pub fn fingerprint(config_json: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    config_json.hash(&mut h);
    env!("CARGO_PKG_VERSION").hash(&mut h);
    if let Ok(exe) = std::env::current_exe().and_then(std::fs::metadata) {
        exe.len().hash(&mut h);
    }
    h.finish()
}

/// The ranks, while MPI is up.
pub struct Mpi {
    #[cfg(feature = "mpi")]
    _universe: mpi::environment::Universe,
    pub rank: usize,
    pub size: usize,
}

#[cfg(feature = "mpi")]
struct World {
    rank: usize,
    size: usize,
}

#[cfg(feature = "mpi")]
impl Collective for World {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allgather_into(&self, local: &[f64], out: &mut [f64]) {
        use mpi::traits::Communicator;
        use mpi::traits::CommunicatorCollectives;
        // MPI_COMM_WORLD's handle: a plain constant while MPI is initialised (the
        // Universe in `Mpi` keeps it so), so no communicator is stored across threads.
        let world = mpi::topology::SimpleCommunicator::world();
        debug_assert_eq!(world.size() as usize, self.size);
        world.all_gather_into(local, out);
    }
    fn allgather_f32_into(&self, local: &[f32], out: &mut [f32]) {
        use mpi::traits::CommunicatorCollectives;
        mpi::topology::SimpleCommunicator::world().all_gather_into(local, out);
    }
}

/// Starts MPI when launched by mpirun and checks that every rank runs the same binary
/// and config; `None` when not under mpirun. The collective is returned separately so
/// the caller can hand it to the trainer while `Mpi` keeps MPI alive.
pub fn start(fingerprint: u64) -> Result<Option<(Mpi, Arc<dyn Collective>)>> {
    if !under_mpirun() {
        return Ok(None);
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = fingerprint;
        bail!(
            "started by mpirun, but this rlrig was built without MPI: rebuild with `cargo build --release -p rlrig --features mpi` (needs Open MPI and libclang)"
        );
    }
    #[cfg(feature = "mpi")]
    {
        use mpi::traits::Communicator;
        let Some(universe) = mpi::initialize() else {
            bail!("MPI was already initialised");
        };
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let c = World { rank, size };
        let all = c.allgather(&[f64::from_bits(fingerprint)]);
        if let Some(k) = all.iter().position(|x| x.to_bits() != all[0].to_bits()) {
            bail!(
                "MPI rank {k} runs a different binary or config than rank 0 (fingerprints {:016x} and {:016x}); start every rank with the same rlrig and settings",
                all[k].to_bits(),
                all[0].to_bits()
            );
        }
        Ok(Some((
            Mpi {
                _universe: universe,
                rank,
                size,
            },
            Arc::new(c),
        )))
    }
}

/// This process's place in the run: the MPI guard (kept alive for the run), the
/// collective the driver shares the work over, this rank and the rank count; one
/// process of one rank when not under mpirun.
pub struct Ranks {
    pub _mpi: Option<Mpi>,
    pub collective: Option<Arc<dyn Collective>>,
    pub rank: usize,
    pub size: usize,
}

/// Joins the ranks of an MPI run of the run whose resolved config is `config_json`
/// (every rank must have the same, and the same binary), or stays one process.
pub fn ranks(config_json: &str) -> Result<Ranks> {
    Ok(match start(fingerprint(config_json))? {
        None => Ranks {
            _mpi: None,
            collective: None,
            rank: 0,
            size: 1,
        },
        Some((m, c)) => Ranks {
            rank: m.rank,
            size: m.size,
            _mpi: Some(m),
            collective: Some(c),
        },
    })
}

impl Ranks {
    /// What runs the networks, with the rank count of an MPI run (`cpu x 2 ranks`).
    pub fn device(&self, device: &str) -> String {
        if self.size > 1 {
            format!("{device} x {} ranks", self.size)
        } else {
            device.to_string()
        }
    }
}
