//! The emulator alone through this crate's safe API: `bench/cpu/ale_bare.cc`'s loop
//! (N emulators stepped in turn, frame skip 4, the last two frames' grey screens, no
//! sticky actions, uniform random minimal-set actions), in Rust. Between the C++ loop
//! (the ceiling) and `rlrig bench env --env Pong-v5` it tells the shim's and the link's
//! share of a step from the env code's (BENCHMARKS.md "Atari").
//!
//!   cargo run --release -p rlrig-ale --example bare_loop -- ROM [STEPS] [ENVS]

use rlrig_ale::{Ale, Settings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(rom) = args.get(1) else {
        return Err("usage: bare_loop ROM [STEPS] [ENVS]".into());
    };
    let steps: usize = args.get(2).map_or(Ok(8000), |s| s.parse())?;
    let n: usize = args.get(3).map_or(Ok(8), |s| s.parse())?;
    let mut ales = (0..n)
        .map(|i| {
            let settings = Settings {
                seed: i as i32 + 1,
                repeat_action_probability: 0.0,
                max_num_frames_per_episode: 0,
                mode: None,
                difficulty: None,
            };
            Ale::new(std::path::Path::new(rom), &settings)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let minimal = ales[0].action_set(false);
    let (h, w) = (210, 160);
    let mut grey = vec![vec![0u8; h * w]; 2 * n];
    // A 64-bit LCG: the actions need no quality, only to be cheap.
    let mut x: u64 = 1;
    let mut reward = 0i64;
    let t0 = std::time::Instant::now();
    let mut done = 0;
    while done < steps {
        for (e, ale) in ales.iter_mut().enumerate() {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let action = minimal[((x >> 33) % minimal.len() as u64) as usize];
            for f in 0..4 {
                reward += i64::from(ale.act(action, 1.0)?);
                if ale.game_over() {
                    break;
                }
                let _ = ale.lives();
                if f >= 2 {
                    ale.screen_grayscale(&mut grey[2 * e + f - 2]);
                }
            }
            if ale.game_over() {
                ale.reset_game()?;
            }
        }
        done += n;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{{\"steps_per_sec\": {:.1}, \"reward\": {reward}}}",
        done as f64 / secs
    );
    Ok(())
}
