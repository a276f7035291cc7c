// ALE's emulator alone, as fast as it goes: the ceiling of any Atari env built on it.
//
// One ALEInterface with Pong-v5's settings (sticky actions 0.25, 108,000 frames an episode,
// minimal action set), random actions, 4 `act` calls a step and the grayscale screen read
// on the last two (what a skip-4 max-pool needs), no resize, no frame stack, no batching.
// rlrig's `bench env --env Pong-v5` does all of that on top; EnvPool and ale-py as well.
// `bench/cpu/ale_bare.sh` builds it against the ALE that rlrig's `atari` feature compiled.
//
//   ale_bare ROM STEPS [SEED]    prints steps/s (one step = 4 frames)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ale/ale_interface.hpp"
#include "ale/common/Log.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ROM STEPS [SEED]\n", argv[0]);
    return 2;
  }
  const long steps = std::atol(argv[2]);
  const int seed = argc > 3 ? std::atoi(argv[3]) : 1;
  ale::Logger::setMode(ale::Logger::Error);
  ale::ALEInterface a;
  a.setInt("random_seed", seed);
  a.setFloat("repeat_action_probability", 0.25f);
  a.setInt("max_num_frames_per_episode", 108000);
  a.loadROM(argv[1]);
  const ale::ActionVect actions = a.getMinimalActionSet();
  const ale::ALEScreen& screen = a.getScreen();
  std::vector<unsigned char> gray[2];
  for (auto& g : gray) g.resize(screen.height() * screen.width());
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, actions.size() - 1);
  long reward = 0, episodes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (long s = 0; s < steps; s++) {
    const ale::Action act = actions[pick(rng)];
    for (int f = 0; f < 4; f++) {
      reward += a.act(act);
      if (f >= 2) a.getScreenGrayscale(gray[f - 2]);
    }
    if (a.game_over()) {
      a.reset_game();
      episodes++;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"steps\": %ld, \"seconds\": %.3f, \"steps_per_sec\": %.1f, \"episodes\": %ld, "
              "\"reward\": %ld, \"checksum\": %u}\n",
              steps, secs, steps / secs, episodes, reward,
              static_cast<unsigned>(gray[1][screen.width() * 100 + 80]));
  return 0;
}
