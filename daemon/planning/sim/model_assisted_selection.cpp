#include "planning/sim/model_assisted_selection.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace placementd::sim {

namespace {

// Candidate sizes of the model's relative error (0: exact up to calibration) and correlation
// lengths (share of ops on another device); marginal likelihood picks one of each.
constexpr double kModelErrors[] = {0.0, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64};
// No shorter than a tenth: the model's error is the sum of its ops' errors, so two placements that
// agree on 90% of the ops share most of it. A shorter length would make the error indistinguishable
// from measurement noise, and a chance excess of the noise would be read as one.
constexpr double kLengths[] = {0.1, 0.3, 1.0, std::numeric_limits<double>::infinity()};
// Correlation lengths in log predicted time: placements the model predicts alike share their
// bottleneck, and with it the model's error there (infinity: the prediction does not matter).
constexpr double kTimeLengths[] = {0.01, 0.03, 0.1,
                                   0.3,  1.0,  std::numeric_limits<double>::infinity()};

double share_moved(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.empty()) return 0.0;
  size_t moved = 0;
  for (size_t i = 0; i < a.size(); ++i) moved += a[i] != b[i];
  return static_cast<double>(moved) / static_cast<double>(a.size());
}

// The hyperparameters are refitted at these counts of candidates added (a fit costs one Cholesky
// per grid point); in between, only the estimates are.
bool fit_at(size_t added) {
  if (added < ModelAssistedSelection::kMinCandidates) return false;
  if (added <= 64) return (added & (added - 1)) == 0;
  return added % 64 == 0;
}

}  // namespace

struct ModelAssistedSelection::State {
  struct Candidate {
    std::vector<int> device_of_op;
    double log_predicted;
    double log_ratio;  // log(measured / predicted)
    double noise_var;
    size_t tag;
  };
  std::vector<Candidate> candidates;
  Eigen::MatrixXd distance;       // share of ops moved, between kept candidates
  Eigen::MatrixXd time_distance;  // |difference of log predicted time|, between kept candidates
  std::vector<double> estimates;  // log step time
  // The contenders: candidates whose measurement leaves a chance that they are the fastest. The
  // model's error is fitted among them only: far slower placements have other bottlenecks, where
  // the model errs in other ways, and would make it look unreliable where the choice is made.
  std::vector<Eigen::Index> contenders;
  size_t added = 0;
  bool fitted = false;
  double model_var = 0.0;
  double length = 1.0;
  double time_length = std::numeric_limits<double>::infinity();

  double log_measured(size_t i) const {
    return candidates[i].log_predicted + candidates[i].log_ratio;
  }

  void choose_contenders() {
    contenders.clear();
    size_t lowest = 0;
    for (size_t i = 1; i < candidates.size(); ++i)
      if (log_measured(i) < log_measured(lowest)) lowest = i;
    const double lowest_sd = std::sqrt(candidates[lowest].noise_var);
    for (size_t i = 0; i < candidates.size(); ++i)
      if (log_measured(i) - log_measured(lowest) <=
          kContenderSigmas * (std::sqrt(candidates[i].noise_var) + lowest_sd))
        contenders.push_back(static_cast<Eigen::Index>(i));
  }

  // Fits the calibration among the contenders at (var, len, time_len) and returns the log marginal
  // likelihood; with `estimate`, also sets their estimates.
  double fit(double var, double len, double time_len, bool estimate) {
    const auto n = static_cast<Eigen::Index>(contenders.size());
    Eigen::MatrixXd k = Eigen::MatrixXd::Zero(n, n);
    if (var > 0.0)
      k = var * (-distance(contenders, contenders).array() / len -
                 0.5 * (time_distance(contenders, contenders).array() / time_len).square())
                    .exp()
                    .matrix();
    Eigen::MatrixXd c = k;
    Eigen::VectorXd r(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const Candidate& candidate =
          candidates[static_cast<size_t>(contenders[static_cast<size_t>(i)])];
      c(i, i) += candidate.noise_var + 1e-12;
      r[i] = candidate.log_ratio;
    }
    const Eigen::LLT<Eigen::MatrixXd> llt(c);
    if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
    const Eigen::VectorXd ones = Eigen::VectorXd::Ones(n);
    const Eigen::VectorXd c_ones = llt.solve(ones);
    // Generalised least squares: the calibration the correlated errors make most likely.
    const double calibration = c_ones.dot(r) / c_ones.dot(ones);
    const Eigen::VectorXd residual = r - calibration * ones;
    const Eigen::VectorXd a = llt.solve(residual);
    if (estimate) {
      const Eigen::VectorXd model_error = k * a;  // the model's error where each contender lies
      for (Eigen::Index i = 0; i < n; ++i) {
        const auto at = static_cast<size_t>(contenders[static_cast<size_t>(i)]);
        estimates[at] = candidates[at].log_predicted + calibration + model_error[i];
      }
    }
    const Eigen::MatrixXd l = llt.matrixL();
    return -0.5 * residual.dot(a) - l.diagonal().array().log().sum();
  }
};

ModelAssistedSelection::ModelAssistedSelection(size_t max_candidates)
    : max_candidates_(std::max(max_candidates, kMinCandidates)),
      state_(std::make_unique<State>()) {}
ModelAssistedSelection::~ModelAssistedSelection() = default;
ModelAssistedSelection::ModelAssistedSelection(ModelAssistedSelection&&) noexcept = default;
ModelAssistedSelection& ModelAssistedSelection::operator=(ModelAssistedSelection&&) noexcept =
    default;

void ModelAssistedSelection::add(std::vector<int> device_of_op, double predicted_s,
                                 double measured_s, double noise, size_t tag) {
  if (!(predicted_s > 0.0) || !(measured_s > 0.0) || !std::isfinite(predicted_s) ||
      !std::isfinite(measured_s))
    throw std::invalid_argument(
        "model-assisted selection: step times must be positive and finite, got predicted " +
        std::to_string(predicted_s) + " s, measured " + std::to_string(measured_s) + " s");
  if (!(noise >= 0.0) || !std::isfinite(noise))
    throw std::invalid_argument("model-assisted selection: noise must be >= 0");
  State& s = *state_;
  if (!s.candidates.empty() && device_of_op.size() != s.candidates.front().device_of_op.size())
    throw std::invalid_argument("model-assisted selection: a placement of " +
                                std::to_string(device_of_op.size()) + " ops after ones of " +
                                std::to_string(s.candidates.front().device_of_op.size()));
  const auto n = static_cast<Eigen::Index>(s.candidates.size());
  s.distance.conservativeResize(n + 1, n + 1);
  s.time_distance.conservativeResize(n + 1, n + 1);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& other = s.candidates[static_cast<size_t>(i)];
    s.distance(i, n) = s.distance(n, i) = share_moved(device_of_op, other.device_of_op);
    s.time_distance(i, n) = s.time_distance(n, i) =
        std::abs(std::log(predicted_s) - other.log_predicted);
  }
  s.distance(n, n) = s.time_distance(n, n) = 0.0;
  s.candidates.push_back({std::move(device_of_op), std::log(predicted_s),
                          std::log(measured_s / predicted_s), noise * noise, tag});
  ++s.added;
  if (s.candidates.size() > max_candidates_) {
    // Keep the ones the model predicts fastest: swap the slowest to the end and drop it.
    const auto slowest =
        static_cast<Eigen::Index>(std::max_element(s.candidates.begin(), s.candidates.end(),
                                                   [](const auto& a, const auto& b) {
                                                     return a.log_predicted < b.log_predicted;
                                                   }) -
                                  s.candidates.begin());
    const Eigen::Index last = n;
    if (slowest != last) {
      std::swap(s.candidates[static_cast<size_t>(slowest)], s.candidates.back());
      for (Eigen::MatrixXd* m : {&s.distance, &s.time_distance}) {
        m->row(slowest).swap(m->row(last));
        m->col(slowest).swap(m->col(last));
      }
    }
    s.candidates.pop_back();
    s.distance.conservativeResize(last, last);
    s.time_distance.conservativeResize(last, last);
  }
  s.estimates.resize(s.candidates.size());
  refit(fit_at(s.added));
}

void ModelAssistedSelection::refit(bool hyperparameters) {
  State& s = *state_;
  const bool noisy = std::any_of(s.candidates.begin(), s.candidates.end(),
                                 [](const auto& c) { return c.noise_var > 0; });
  for (size_t i = 0; i < s.candidates.size(); ++i)
    s.estimates[i] = s.candidates[i].log_predicted + s.candidates[i].log_ratio;  // the measurement
  s.choose_contenders();
  if (s.contenders.size() < kMinCandidates || !noisy) {
    s.fitted = false;
    return;
  }
  if (hyperparameters || !s.fitted) {
    double best = -std::numeric_limits<double>::infinity();
    for (double error : kModelErrors) {
      for (double len : kLengths) {
        for (double time_len : kTimeLengths) {
          const double likelihood = s.fit(error * error, len, time_len, false);
          if (likelihood > best) {
            best = likelihood;
            s.model_var = error * error;
            s.length = len;
            s.time_length = time_len;
          }
          if (error == 0.0) break;  // no error, no length to it
        }
        if (error == 0.0) break;
      }
    }
    s.fitted = true;
  }
  s.fit(s.model_var, s.length, s.time_length, true);
}

std::optional<ModelAssistedSelection::Best> ModelAssistedSelection::best() const {
  const State& s = *state_;
  if (s.candidates.empty()) return std::nullopt;
  // Fitted, only the contenders have estimates that are not their measurement; they also hold the
  // lowest measurement, so the best is among them.
  std::optional<size_t> i;
  const auto consider = [&](size_t j) {
    if (!i || s.estimates[j] < s.estimates[*i]) i = j;
  };
  if (s.fitted)
    for (Eigen::Index j : s.contenders) consider(static_cast<size_t>(j));
  else
    for (size_t j = 0; j < s.candidates.size(); ++j) consider(j);
  return Best{s.candidates[*i].tag, &s.candidates[*i].device_of_op, std::exp(s.estimates[*i])};
}

size_t ModelAssistedSelection::size() const { return state_->candidates.size(); }

std::optional<double> ModelAssistedSelection::model_error() const {
  if (!state_->fitted) return std::nullopt;
  return std::sqrt(state_->model_var);
}

std::optional<double> ModelAssistedSelection::correlation_length() const {
  if (!state_->fitted) return std::nullopt;
  return state_->length;
}

std::optional<double> ModelAssistedSelection::time_correlation_length() const {
  if (!state_->fitted) return std::nullopt;
  return state_->time_length;
}

}  // namespace placementd::sim
