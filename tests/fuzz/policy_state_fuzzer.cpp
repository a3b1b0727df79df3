// libFuzzer target: a learned placer's stored policy state (state directory, policies/<uid>/),
// which whoever could write that directory may have written. TorchPolicy::load_state reads it as a
// tensor archive (tensor_archive.h, on LibTorch's zip reader); the daemon logs "stored policy
// state not used" for what it refuses and starts afresh. Its first run found LibTorch's pickled
// archive, which policies were saved in before, reading past a parameter's buffer. The
// first byte picks the network (feedforward, gcn, seq2seq), the rest is the state. A finding is a
// crash, any exception but std::invalid_argument, or a refused state that changed the policy
// (load_state is all or nothing).
//
// With PLACEMENT_FUZZ_WRITE_SEEDS=DIR set it writes one trained state per network into DIR as
// seeds and exits (scripts/sanitize.sh does so before fuzzing).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "feedforward_network.h"
#include "fuzz_context.h"
#include "gcn_network.h"
#include "placer_inputs.h"
#include "seq2seq_network.h"
#include "torch_policy.h"

namespace {

using placement::plugins::LearnedPlacer;

struct Subject {
  std::unique_ptr<LearnedPlacer> placer;
  placement::Action action;
  std::string state;  // as prepared: what a refused state must leave
  double log_prob = 0;
};

std::vector<Subject>& subjects() {
  static std::vector<Subject> all = [] {
    placement::plugins::LearnedPolicyOptions options;
    options.shaping.noise_std = 0.0;
    options.vocabulary = 8;
    const std::vector<std::pair<const char*, placement::plugins::NetworkFactory>> networks = {
        {"feedforward", placement::plugins::feedforward_network(8)},
        {"gcn", placement::plugins::gcn_network(8)},
        {"seq2seq",
         placement::plugins::seq2seq_network(8, 4, placement::plugins::AttentionPosition::kAfter)}};
    std::vector<Subject> made;
    for (const auto& [name, factory] : networks) {
      Subject s{std::make_unique<LearnedPlacer>(name, factory, options), {}, {}, 0};
      std::mt19937_64 rng(7);
      const placement::OpGraph& g = placement::fuzz::graph();
      s.placer->prepare(g, placement::testing::each_op_alone(g), placement::fuzz::devices(), rng);
      s.action = s.placer->place(rng);
      // A trained state (optimiser moments too), as a job leaves one.
      for (int i = 0; i < 2; ++i) {
        s.placer->policy()->accumulate_gradient({s.action}, {1.0}, 0.0);
        s.placer->policy()->apply_gradient({0.05, 1.0});
      }
      s.state = s.placer->policy()->save_state();
      s.log_prob = s.placer->policy()->log_prob(s.action);
      made.push_back(std::move(s));
    }
    return made;
  }();
  return all;
}

void write_seeds(const std::string& dir) {
  for (size_t i = 0; i < subjects().size(); ++i) {
    const std::string path = dir + "/state_" + std::to_string(i);
    std::ofstream out(path, std::ios::binary);
    out.put(static_cast<char>(i));
    out << subjects()[i].state;
    if (!out) {
      std::fprintf(stderr, "policy_state_fuzzer: cannot write %s\n", path.c_str());
      std::exit(1);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("PLACEMENT_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  subjects();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Subject& s = subjects()[data[0] % subjects().size()];
  placement::TrainablePolicy& policy = *s.placer->policy();
  try {
    policy.load_state(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  } catch (const std::invalid_argument&) {
    if (policy.log_prob(s.action) != s.log_prob || policy.save_state() != s.state) {
      std::fprintf(stderr, "policy_state_fuzzer: a refused state changed the policy\n");
      std::abort();
    }
    return 0;
  }
  // Accepted (a change no reader checks, or another valid state): back to the prepared one.
  policy.load_state(s.state);
  return 0;
}
