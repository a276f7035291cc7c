// A C interface to ALE's C++ `ALEInterface` for rlrig-ale's Rust bindings (src/lib.rs).
// Every function catches C++ exceptions: an error returns -1 (or null) and leaves its
// message in a thread-local string that `rlrig_ale_last_error` returns.
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "ale/ale_interface.hpp"
#include "ale/common/Log.hpp"

using ale::ALEInterface;

static thread_local std::string last_error;

// ALE's cloneState leaves out the action a sticky action repeats (StellaEnvironment's
// private m_player_a_action and friends), so a restored emulator would repeat NOOP where
// the original repeats its last action. These members are reached through the standard
// C++ rule that explicit template instantiations may name private members ([temp.spec]
// / [temp.explicit]: "the usual access checking rules do not apply to names used to
// specify explicit instantiations"): `Steal` stores the member pointer in a static.
template <typename Tag, typename Tag::type M>
struct Steal {
  friend typename Tag::type get(Tag) { return M; }
};
struct ActionA { using type = ale::Action ale::StellaEnvironment::*; friend type get(ActionA); };
struct ActionB { using type = ale::Action ale::StellaEnvironment::*; friend type get(ActionB); };
struct StrengthA { using type = float ale::StellaEnvironment::*; friend type get(StrengthA); };
struct StrengthB { using type = float ale::StellaEnvironment::*; friend type get(StrengthB); };
template struct Steal<ActionA, &ale::StellaEnvironment::m_player_a_action>;
template struct Steal<ActionB, &ale::StellaEnvironment::m_player_b_action>;
template struct Steal<StrengthA, &ale::StellaEnvironment::m_paddle_a_strength>;
template struct Steal<StrengthB, &ale::StellaEnvironment::m_paddle_b_strength>;

template <typename F>
static int guarded(F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown C++ exception";
  }
  return -1;
}

extern "C" {

const char* rlrig_ale_last_error() { return last_error.c_str(); }

// A new ALE with `rom` loaded: `seed` is ALE's `random_seed` (sticky actions, the
// emulator's own randomness); mode and difficulty < 0 keep the ROM's defaults.
ALEInterface* rlrig_ale_new(const char* rom, int32_t seed, float repeat_action_probability,
                            int32_t max_num_frames_per_episode, int32_t mode,
                            int32_t difficulty) {
  ALEInterface* out = nullptr;
  guarded([&] {
    ale::Logger::setMode(ale::Logger::Error);
    auto* a = new ALEInterface();
    try {
      a->setInt("random_seed", seed);
      a->setFloat("repeat_action_probability", repeat_action_probability);
      a->setInt("max_num_frames_per_episode", max_num_frames_per_episode);
      a->loadROM(rom);
      if (mode >= 0) a->setMode(static_cast<ale::game_mode_t>(mode));
      if (difficulty >= 0) a->setDifficulty(static_cast<ale::difficulty_t>(difficulty));
    } catch (...) {
      delete a;
      throw;
    }
    out = a;
  });
  return out;
}

void rlrig_ale_free(ALEInterface* a) { delete a; }

int rlrig_ale_act(ALEInterface* a, int32_t action, float strength, int32_t* reward) {
  return guarded([&] { *reward = a->act(static_cast<ale::Action>(action), strength); });
}

int rlrig_ale_reset(ALEInterface* a) {
  return guarded([&] { a->reset_game(); });
}

int rlrig_ale_game_over(const ALEInterface* a, int with_truncation) {
  return a->game_over(with_truncation != 0) ? 1 : 0;
}

int rlrig_ale_lives(ALEInterface* a) { return a->lives(); }

void rlrig_ale_screen_dims(const ALEInterface* a, int32_t* height, int32_t* width) {
  const ale::ALEScreen& s = a->getScreen();
  *height = static_cast<int32_t>(s.height());
  *width = static_cast<int32_t>(s.width());
}

// The screen through ALE's palette: `out` holds height x width x 3 bytes (rgb) or
// height x width (grayscale).
void rlrig_ale_screen_rgb(const ALEInterface* a, uint8_t* out) {
  const ale::ALEScreen& s = a->environment->getScreen();
  a->theOSystem->colourPalette().applyPaletteRGB(out, s.getArray(), s.width() * s.height());
}

void rlrig_ale_screen_grayscale(const ALEInterface* a, uint8_t* out) {
  const ale::ALEScreen& s = a->environment->getScreen();
  a->theOSystem->colourPalette().applyPaletteGrayscale(out, s.getArray(),
                                                       s.width() * s.height());
}

// The screen's palette indices (height x width bytes), ALE's own buffer: valid until the
// emulator next runs a frame or is freed.
const uint8_t* rlrig_ale_screen_indices(const ALEInterface* a) {
  return a->environment->getScreen().getArray();
}

// The grayscale palette as getScreenGrayscale applies it, one entry per TIA colour:
// out[k] for palette index 2k (the screen holds even indices only; ALE's palette keeps
// each colour's grayscale in the odd entry after it).
void rlrig_ale_grayscale_palette(const ALEInterface* a, uint8_t* out) {
  for (int k = 0; k < 128; k++) {
    uint8_t index = static_cast<uint8_t>(2 * k);
    a->theOSystem->colourPalette().applyPaletteGrayscale(out + k, &index, 1);
  }
}

// The 128 bytes of RAM.
void rlrig_ale_ram(const ALEInterface* a, uint8_t* out) {
  const ale::ALERAM& r = a->getRAM();
  std::memcpy(out, r.array(), r.size());
}

// Writes up to `cap` ids of the minimal (or, with minimal == 0, the full legal) action
// set and returns how many there are.
int rlrig_ale_action_set(const ALEInterface* a, int minimal, int32_t* out, int cap) {
  ale::ActionVect v = minimal ? a->getMinimalActionSet() : a->getLegalActionSet();
  for (size_t i = 0; i < v.size() && static_cast<int>(i) < cap; i++) out[i] = v[i];
  return static_cast<int>(v.size());
}

// The actions and paddle strengths a sticky action repeats: out[0..4] = action A,
// action B, strength A, strength B.
void rlrig_ale_get_sticky(const ALEInterface* a, float* out) {
  const ale::StellaEnvironment& e = *a->environment;
  out[0] = static_cast<float>(e.*get(ActionA()));
  out[1] = static_cast<float>(e.*get(ActionB()));
  out[2] = e.*get(StrengthA());
  out[3] = e.*get(StrengthB());
}

void rlrig_ale_set_sticky(ALEInterface* a, const float* in) {
  ale::StellaEnvironment& e = *a->environment;
  e.*get(ActionA()) = static_cast<ale::Action>(static_cast<int>(in[0]));
  e.*get(ActionB()) = static_cast<ale::Action>(static_cast<int>(in[1]));
  e.*get(StrengthA()) = in[2];
  e.*get(StrengthB()) = in[3];
}

// The serialised state (with ALE's random generator): the bytes are written to a buffer
// allocated here, freed with rlrig_ale_free_bytes.
int rlrig_ale_clone_state(ALEInterface* a, uint8_t** bytes, size_t* len) {
  return guarded([&] {
    std::string s = a->cloneState(true).serialize();
    *bytes = new uint8_t[s.size()];
    std::memcpy(*bytes, s.data(), s.size());
    *len = s.size();
  });
}

void rlrig_ale_free_bytes(uint8_t* bytes) { delete[] bytes; }

int rlrig_ale_restore_state(ALEInterface* a, const uint8_t* bytes, size_t len) {
  return guarded([&] {
    a->restoreState(ale::ALEState(std::string(reinterpret_cast<const char*>(bytes), len)));
  });
}

}  // extern "C"
