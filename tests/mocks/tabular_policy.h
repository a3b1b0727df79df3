#pragma once
// Test double for TrainablePolicy: independent softmax over `choices` values per position, with
// exact gradients and plain gradient ascent (so tests can compute every update by hand).

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "placement/policy.h"

namespace placement::testing {

class TabularPolicy : public TrainablePolicy {
 public:
  TabularPolicy(int positions, int choices)
      : logits(positions, std::vector<double>(choices, 0.0)),
        grad(positions, std::vector<double>(choices, 0.0)) {}

  std::vector<double> probs(int position) const {
    const auto& l = logits[position];
    double max = l[0];
    for (double v : l) max = std::max(max, v);
    std::vector<double> p(l.size());
    double sum = 0;
    for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp(l[i] - max);
    for (double& v : p) v /= sum;
    return p;
  }

  Action sample(std::mt19937_64& rng) const {
    Action a;
    for (size_t pos = 0; pos < logits.size(); ++pos) {
      const std::vector<double> p = probs(static_cast<int>(pos));
      std::discrete_distribution<int> pick(p.begin(), p.end());
      a.push_back(pick(rng));
    }
    return a;
  }

  double log_prob(const Action& action) override {
    double total = 0;
    for (size_t pos = 0; pos < action.size(); ++pos)
      total += std::log(probs(static_cast<int>(pos))[action[pos]]);
    return total;
  }

  void accumulate_gradient(const std::vector<Action>& actions, const std::vector<double>& weights,
                           double entropy_weight) override {
    ++accumulate_calls;
    last_weights = weights;
    for (size_t s = 0; s < actions.size(); ++s)
      for (size_t pos = 0; pos < actions[s].size(); ++pos) {
        const auto p = probs(static_cast<int>(pos));
        // d log softmax_a / d l_j = 1[j = a] - p_j
        for (size_t j = 0; j < p.size(); ++j)
          grad[pos][j] +=
              weights[s] * ((static_cast<int>(j) == actions[s][pos] ? 1.0 : 0.0) - p[j]);
      }
    if (entropy_weight != 0)
      for (size_t pos = 0; pos < logits.size(); ++pos) {
        const auto p = probs(static_cast<int>(pos));
        double h = 0;
        for (double v : p) h -= v * std::log(v);
        // dH/dl_j = -p_j (log p_j + H)
        for (size_t j = 0; j < p.size(); ++j)
          grad[pos][j] += entropy_weight * (-p[j] * (std::log(p[j]) + h));
      }
  }

  void apply_gradient(const OptimizerSettings& settings) override {
    ++apply_calls;
    last_settings = settings;
    double norm = 0;
    for (const auto& row : grad)
      for (double g : row) norm += g * g;
    norm = std::sqrt(norm);
    const double scale =
        settings.clip_norm > 0 && norm > settings.clip_norm ? settings.clip_norm / norm : 1.0;
    for (size_t pos = 0; pos < logits.size(); ++pos)
      for (size_t j = 0; j < logits[pos].size(); ++j) {
        logits[pos][j] += settings.learning_rate * scale * grad[pos][j];
        grad[pos][j] = 0;
      }
  }

  std::string save_state() const override { return {}; }
  void load_state(const std::string&) override {}

  std::vector<std::vector<double>> logits;
  std::vector<std::vector<double>> grad;
  int accumulate_calls = 0;
  int apply_calls = 0;
  std::vector<double> last_weights;
  OptimizerSettings last_settings;
};

}  // namespace placement::testing
