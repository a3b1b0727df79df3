#include "planning/sim/refit.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include <Eigen/Cholesky>
#include <Eigen/Dense>

#include "planning/sim/cost_model.h"

namespace placementd::sim {

namespace {

// The factors of a model and which of them the measurements exercise.
struct Factors {
  // (op kind, device kind) → index, each device → index, and each link (a < b) → index.
  std::map<std::pair<std::string, std::string>, size_t> compute;
  std::map<size_t, size_t> device;
  std::map<std::pair<size_t, size_t>, size_t> links;
  // device kind → the host's launch cost per op on that kind, as the cost model counts it: its
  // index, and the device whose spec and speed the kind's profiles are in.
  struct Launch {
    size_t index;
    const placement::Device* device;
  };
  std::map<std::string, Launch> launch;
  std::vector<std::string> names;
  /// Each factor's prior spread in log.
  std::vector<double> prior_log_sd;

  size_t size() const { return names.size(); }
};

// The device whose spec and speed a kind's profiles are in (Simulator::add_predicted_profiles
// fills a kind's in from its first device with a spec), or nullptr when no device of the kind has
// a spec with a launch cost.
const placement::Device* launch_device(const placement::DeviceSet& devices,
                                       const std::string& kind) {
  for (const placement::Device& d : devices.devices)
    if (to_string(d.kind) == kind && d.spec) return d.spec->launch_s > 0 ? &d : nullptr;
  return nullptr;
}

Factors exercised_factors(const Simulator& model, const std::vector<MeasuredPlacement>& measured,
                          const RefitOptions& options) {
  const placement::OpGraph& graph = model.graph();
  const placement::DeviceSet& devices = model.devices();
  Factors f;
  for (const MeasuredPlacement& m : measured) {
    const std::vector<int>& on = m.placement.device_of_op;
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      const auto d = static_cast<size_t>(on[op]);
      const std::string device_kind = to_string(devices.devices[d].kind);
      if (!graph.ops[op].profile.count(device_kind)) continue;
      auto [at, fresh] =
          f.compute.emplace(std::make_pair(graph.ops[op].kind, device_kind), f.names.size());
      if (fresh) {
        f.names.push_back(graph.ops[op].kind + " on " + device_kind);
        f.prior_log_sd.push_back(options.prior_log_sd);
      }
      // The host's cost per launch is a preset's guess (the GPU runs measured 2-4x it): one factor
      // per kind moves every op's launches there, most of a small op's time and little of a large
      // one's, which no op kind's factor says for all kinds at once. Measured profiles take it
      // too: a profiler's own cost per op is such an error in them.
      if (graph.ops[op].work && !f.launch.count(device_kind))
        if (const placement::Device* at = launch_device(devices, device_kind)) {
          f.launch.emplace(device_kind, Factors::Launch{f.names.size(), at});
          f.names.push_back("launch on " + device_kind);
          f.prior_log_sd.push_back(options.launch_prior_log_sd);
        }
      // A device of a kind may be slower than its siblings (another tenant, a lower clock), but
      // seldom is: a kind's factor explains what all its devices show first.
      if (f.device.emplace(d, f.names.size()).second) {
        f.names.push_back("compute on " + devices.devices[d].name());
        f.prior_log_sd.push_back(options.device_prior_log_sd);
      }
    }
    for (const placement::Edge& e : graph.edges) {
      const auto a = static_cast<size_t>(on[static_cast<size_t>(e.src)]);
      const auto b = static_cast<size_t>(on[static_cast<size_t>(e.dst)]);
      if (a == b) continue;
      auto [at, fresh] = f.links.emplace(std::minmax(a, b), f.names.size());
      if (fresh) {
        f.names.push_back("link " + devices.devices[std::min(a, b)].name() + " <-> " +
                          devices.devices[std::max(a, b)].name());
        f.prior_log_sd.push_back(options.prior_log_sd);
      }
    }
  }
  return f;
}

// `model` with factor k scaled by exp(log_scale[k]): an op kind's times on a device kind, the
// launches' share of every op's times on a device kind, a device's times (its speed divided), or a
// link's transfer time (bandwidth divided, latency multiplied).
Simulator scaled(const Simulator& model, const SimulatorOptions& options, const Factors& f,
                 const Eigen::VectorXd& log_scale) {
  placement::OpGraph graph = model.graph();
  for (placement::Op& op : graph.ops)
    for (auto& [device_kind, p] : op.profile) {
      // The simulator times a predicted profile by the cost model, per device, and would ignore
      // its scale: the refitted model takes the prediction as its figure (exact for devices of
      // one spec per kind; devices of a kind that differ in spec get the first one's, by speed).
      p.predicted = false;
      if (const auto at = f.launch.find(device_kind); at != f.launch.end() && op.work) {
        const placement::Device& device = *at->second.device;
        const double factor = std::exp(log_scale[static_cast<Eigen::Index>(at->second.index)]);
        const LaunchShare share = launch_share(*op.work, op.parameter_bytes, *device.spec);
        // A measured profile may have taken less than the cost model's launches: never below 0.
        auto relaunch = [factor, speed = device.speed](double& t, double launches) {
          t += (factor - 1.0) * std::min(launches * speed, t);
        };
        relaunch(p.forward_s, share.forward_s);
        relaunch(p.backward_s, share.backward_s);
        relaunch(p.update_s, share.update_s);
      }
      const auto at = f.compute.find({op.kind, device_kind});
      if (at == f.compute.end()) continue;
      const double s = std::exp(log_scale[static_cast<Eigen::Index>(at->second)]);
      p.forward_s *= s;
      p.backward_s *= s;
      p.update_s *= s;
    }
  placement::DeviceSet devices = model.devices();
  for (const auto& [d, k] : f.device)
    devices.devices[d].speed /= std::exp(log_scale[static_cast<Eigen::Index>(k)]);
  for (const auto& [pair, k] : f.links) {
    const double s = std::exp(log_scale[static_cast<Eigen::Index>(k)]);
    for (auto [a, b] : {pair, std::make_pair(pair.second, pair.first)}) {
      devices.bandwidth[a][b] /= s;
      devices.latency[a][b] *= s;
    }
  }
  return Simulator(std::move(graph), std::move(devices), options);
}

// The model's step time for `p`, or nullopt where it cannot give a positive, finite one (it
// rejects the placement, or cannot time an op on the device it is on).
std::optional<double> predicted(const Simulator& sim, const placement::Placement& p) {
  try {
    const SimulationResult s = sim.simulate(p);
    if (s.valid && s.step_time_s > 0 && std::isfinite(s.step_time_s)) return s.step_time_s;
  } catch (const std::invalid_argument&) {
  }
  return std::nullopt;
}

// Residuals of `sim` against the measurements, each over its log_sd; nullopt when the scaled
// model cannot time one (it never fails where the unscaled one did not: memory is not scaled, but
// a model is not trusted blindly).
std::optional<Eigen::VectorXd> residuals(const Simulator& sim,
                                         const std::vector<MeasuredPlacement>& measured) {
  Eigen::VectorXd r(static_cast<Eigen::Index>(measured.size()));
  for (size_t i = 0; i < measured.size(); ++i) {
    const std::optional<double> t = predicted(sim, measured[i].placement);
    if (!t) return std::nullopt;
    r[static_cast<Eigen::Index>(i)] =
        (std::log(*t) - std::log(measured[i].step_time_s)) / measured[i].log_sd;
  }
  return r;
}

double rms_log_error(const Eigen::VectorXd& weighted,
                     const std::vector<MeasuredPlacement>& measured) {
  if (measured.empty()) return 0.0;
  double sum = 0.0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const double e = weighted[static_cast<Eigen::Index>(i)] * measured[i].log_sd;
    sum += e * e;
  }
  return std::sqrt(sum / static_cast<double>(measured.size()));
}

// Levenberg–Marquardt over the factors, for one arrangement of execution resources.
class Fit {
 public:
  Fit(const Simulator& model, const std::vector<MeasuredPlacement>& measured, const Factors& f,
      const RefitOptions& options)
      : model_(model), measured_(measured), f_(f), options_(options) {
    prior_ = Eigen::VectorXd(static_cast<Eigen::Index>(f.size()));  // each factor's precision
    for (size_t k = 0; k < f.size(); ++k)
      prior_[static_cast<Eigen::Index>(k)] = 1.0 / (f.prior_log_sd[k] * f.prior_log_sd[k]);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(options.max_seconds));
  }

  // Where a fit stands: the factors, the model they make and its residuals.
  struct State {
    SimulatorOptions options;
    Eigen::VectorXd theta;
    Simulator model;
    Eigen::VectorXd residuals;
    double objective = 0.0;
  };

  // The model as given (its predicted profiles taken as figures), or nullopt where that makes a
  // measured placement untimeable.
  std::optional<State> start() const {
    Eigen::VectorXd theta = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(f_.size()));
    return evaluate(model_.options(), theta);
  }

  std::optional<State> evaluate(const SimulatorOptions& options,
                                const Eigen::VectorXd& theta) const {
    Simulator sim = scaled(model_, options, f_, theta);
    std::optional<Eigen::VectorXd> r = residuals(sim, measured_);
    if (!r) return std::nullopt;
    const double objective = r->squaredNorm() + (prior_.array() * theta.array().square()).sum();
    return State{options, theta, std::move(sim), std::move(*r), objective};
  }

  // Moves `s` downhill for RefitOptions::iterations at most; counts the steps taken.
  void descend(State& s) {
    const auto N = static_cast<Eigen::Index>(measured_.size());
    const auto K = static_cast<Eigen::Index>(f_.size());
    double lambda = 1e-2;
    for (int it = 0; it < options_.iterations && K > 0 && N > 0 && !out_of_time(); ++it) {
      Eigen::MatrixXd J(N, K);
      for (Eigen::Index k = 0; k < K && !out_of_time(); ++k) {
        Eigen::VectorXd t = s.theta;
        t[k] += options_.step;
        const std::optional<Eigen::VectorXd> rk =
            residuals(scaled(model_, s.options, f_, t), measured_);
        J.col(k) =
            rk ? Eigen::VectorXd((*rk - s.residuals) / options_.step) : Eigen::VectorXd::Zero(N);
      }
      if (timed_out_) break;
      const Eigen::MatrixXd JtJ = J.transpose() * J;
      const Eigen::VectorXd gradient =
          J.transpose() * s.residuals + Eigen::VectorXd(prior_.cwiseProduct(s.theta));
      bool improved = false;
      // Levenberg–Marquardt: a step that does not lower the objective is retried shorter.
      for (int tries = 0; tries < 6 && !improved && !out_of_time(); ++tries) {
        Eigen::MatrixXd A = JtJ;
        A.diagonal().array() += prior_.array() + lambda * (JtJ.diagonal().array() + prior_.array());
        const Eigen::LDLT<Eigen::MatrixXd> solver(A);  // A is positive definite: prior > 0
        const Eigen::VectorXd delta = solver.solve(-gradient);
        if (solver.info() != Eigen::Success || !delta.allFinite()) break;
        // A factor beyond 20x either way is not what a profile or a preset gets wrong.
        const Eigen::VectorXd next = (s.theta + delta).cwiseMax(-3.0).cwiseMin(3.0);
        std::optional<State> candidate = evaluate(s.options, next);
        if (candidate && candidate->objective < s.objective) {
          s = std::move(*candidate);
          lambda = std::max(1e-4, lambda / 3);
          improved = true;
          ++steps_;
        } else {
          lambda *= 4;
        }
      }
      if (!improved) break;
    }
  }

  // Two devices the model has compute at once that the measurements say take turns (slices of
  // one GPU time-sliced, two jobs' worth under MPS): the pair that screens best as one execution
  // resource, kept if, its factors fitted again, it explains the measurements by kSharingEvidence
  // more than the model without it fitted as long. Factors fitted without it may have taken up
  // the turns (two devices slower, or the link between them, wherever they run), so pairs are
  // screened with the fitted factors, with the pair's own device factors at 1 and with every
  // factor at 1.
  std::optional<std::pair<State, std::string>> more_sharing(const State& s) {
    // The fit's objective is -2 log of the measurements' likelihood and the prior's: a drop of 6
    // makes them 20 times as likely. A pair found wrongly would make every later search avoid
    // running two devices together that compute at once.
    constexpr double kSharingEvidence = 6.0;
    const placement::DeviceSet& devices = model_.devices();
    const size_t D = devices.size();
    const std::vector<size_t> group = execution_resources(s.options, devices);
    std::optional<State> best;
    std::string which;
    const Eigen::VectorXd all_at_one = Eigen::VectorXd::Zero(s.theta.size());
    for (size_t a = 0; a < D; ++a)
      for (size_t b = a + 1; b < D && !out_of_time(); ++b) {
        if (devices.devices[a].kind != devices.devices[b].kind || group[a] == group[b] ||
            !both_used(a, b))
          continue;
        SimulatorOptions options = s.options;
        options.shared_with = joined(group, a, b);
        Eigen::VectorXd own_at_one = s.theta;
        for (size_t d : {a, b})
          if (auto at = f_.device.find(d); at != f_.device.end())
            own_at_one[static_cast<Eigen::Index>(at->second)] = 0.0;
        const std::array<const Eigen::VectorXd*, 3> thetas = {&s.theta, &own_at_one, &all_at_one};
        for (const Eigen::VectorXd* theta : thetas) {
          std::optional<State> c = evaluate(options, *theta);
          if (c && (!best || c->objective < best->objective)) {
            best = std::move(c);
            which = devices.devices[a].name() + " and " + devices.devices[b].name();
          }
        }
      }
    if (!best) return std::nullopt;
    const size_t steps = steps_;
    descend(*best);
    bool kept = best->objective <= s.objective - kSharingEvidence;
    if (kept) {
      // `s` stopped after RefitOptions::iterations: the pair must beat it fitted as long again,
      // not the extra iterations.
      State longer = s;
      descend(longer);
      kept = best->objective <= longer.objective - kSharingEvidence;
    }
    // The pair's fit and its comparison are not the factors' steps: a kept pair says the model
    // moved by itself (RefitResult::shared).
    steps_ = steps;
    if (!kept) return std::nullopt;
    return std::make_pair(std::move(*best), which);
  }

  bool out_of_time() const {
    timed_out_ =
        timed_out_ || (options_.max_seconds > 0 && std::chrono::steady_clock::now() > deadline_);
    return timed_out_;
  }
  bool timed_out() const { return timed_out_; }
  size_t steps() const { return steps_; }

 private:
  static std::vector<size_t> joined(std::vector<size_t> group, size_t a, size_t b) {
    const size_t from = std::max(group[a], group[b]), to = std::min(group[a], group[b]);
    for (size_t& g : group)
      if (g == from) g = to;
    return group;
  }

  // Whether a measured placement runs ops on both: no other can show whether they take turns.
  bool both_used(size_t a, size_t b) const {
    for (const MeasuredPlacement& m : measured_) {
      const std::vector<int>& on = m.placement.device_of_op;
      if (std::find(on.begin(), on.end(), static_cast<int>(a)) != on.end() &&
          std::find(on.begin(), on.end(), static_cast<int>(b)) != on.end())
        return true;
    }
    return false;
  }

  const Simulator& model_;
  const std::vector<MeasuredPlacement>& measured_;
  const Factors& f_;
  const RefitOptions& options_;
  Eigen::VectorXd prior_;
  std::chrono::steady_clock::time_point deadline_;
  mutable bool timed_out_ = false;
  size_t steps_ = 0;
};

}  // namespace

RefitResult refit(const Simulator& model, const std::vector<MeasuredPlacement>& measured_in,
                  const RefitOptions& options) {
  std::vector<MeasuredPlacement> measured;
  for (size_t i = 0; i < measured_in.size(); ++i) {
    const MeasuredPlacement& m = measured_in[i];
    const std::string which = "measurement " + std::to_string(i) + ": ";
    if (!(m.step_time_s > 0) || !std::isfinite(m.step_time_s))
      throw std::invalid_argument(which + "step_time_s must be positive and finite, got " +
                                  std::to_string(m.step_time_s));
    if (!(m.log_sd > 0) || !std::isfinite(m.log_sd))
      throw std::invalid_argument(which + "log_sd must be positive and finite, got " +
                                  std::to_string(m.log_sd));
    try {
      m.placement.validate(model.graph(), model.devices());
    } catch (const std::exception& e) {
      throw std::invalid_argument(which + e.what());
    }
    if (predicted(model, m.placement)) measured.push_back(m);
  }
  const Factors f = exercised_factors(model, measured, options);
  Fit fit(model, measured, f, options);
  // The fit starts from the model with its predicted profiles taken as figures: its error is the
  // one the fit reduces (the same as the model's where a kind's devices share a spec).
  std::optional<Fit::State> s = fit.start();
  if (!s) {
    // Taking the cost model's predictions as profiles made a measured placement untimeable: fit
    // nothing rather than something else.
    RefitResult none{Simulator(model), {}, {}, 0.0, 0.0, 0, false, false};
    return none;
  }
  const double before = rms_log_error(s->residuals, measured);
  fit.descend(*s);
  // Whether the factors' fit was cut short: the search for turns after it is optional, and its
  // running out of time changes nothing the result says, unless it kept a pair it could not fit.
  bool cut_short = fit.timed_out();
  // Turns taken where the model has devices compute at once: what no factor expresses. Sought
  // once the factors explain what they can, so that a kind's slowness is not taken for turns.
  std::vector<std::string> shared;
  while (!fit.out_of_time()) {
    std::optional<std::pair<Fit::State, std::string>> more = fit.more_sharing(*s);
    if (!more) break;
    s = std::move(more->first);
    shared.push_back(std::move(more->second));
    cut_short = cut_short || fit.timed_out();
  }

  const bool moved = fit.steps() > 0 || !shared.empty();
  RefitResult out{std::move(s->model),
                  {},
                  std::move(shared),
                  before,
                  rms_log_error(s->residuals, measured),
                  measured.size(),
                  cut_short,
                  moved};
  for (size_t k = 0; k < f.size(); ++k) {
    const double theta = s->theta[static_cast<Eigen::Index>(k)];
    if (std::abs(theta) > std::log(1.01)) out.factors.push_back({f.names[k], std::exp(theta)});
  }
  std::sort(out.factors.begin(), out.factors.end(), [](const RefitFactor& a, const RefitFactor& b) {
    return std::abs(std::log(a.scale)) > std::abs(std::log(b.scale));
  });
  return out;
}

}  // namespace placementd::sim
