#include "planning/sim/refit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>

#include <Eigen/Cholesky>
#include <Eigen/Dense>

namespace placementd::sim {

namespace {

// The factors of a model and which of them the measurements exercise.
struct Factors {
  // (op kind, device kind) → index, each device → index, and each link (a < b) → index.
  std::map<std::pair<std::string, std::string>, size_t> compute;
  std::map<size_t, size_t> device;
  std::map<std::pair<size_t, size_t>, size_t> links;
  std::vector<std::string> names;
  /// Each factor's prior spread in log.
  std::vector<double> prior_log_sd;

  size_t size() const { return names.size(); }
};

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

// `model` with factor k scaled by exp(log_scale[k]): an op kind's times on a device kind, a
// device's times (its speed divided), or a link's transfer time (bandwidth divided, latency
// multiplied).
Simulator scaled(const Simulator& model, const Factors& f, const Eigen::VectorXd& log_scale) {
  placement::OpGraph graph = model.graph();
  for (placement::Op& op : graph.ops)
    for (auto& [device_kind, p] : op.profile) {
      // The simulator times a predicted profile by the cost model, per device, and would ignore
      // its scale: the refitted model takes the prediction as its figure (exact for devices of
      // one spec per kind; devices of a kind that differ in spec get the first one's, by speed).
      p.predicted = false;
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
  return Simulator(std::move(graph), std::move(devices), model.options());
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
  const auto K = static_cast<Eigen::Index>(f.size());
  Eigen::VectorXd prior(K);  // each factor's prior precision
  for (Eigen::Index k = 0; k < K; ++k)
    prior[k] =
        1.0 / (f.prior_log_sd[static_cast<size_t>(k)] * f.prior_log_sd[static_cast<size_t>(k)]);

  Eigen::VectorXd theta = Eigen::VectorXd::Zero(K);
  Simulator base = scaled(model, f, theta);
  // The fit starts from `base`, the model with its predicted profiles taken as figures: its error
  // is the one the fit reduces (the same as the model's where a kind's devices share a spec).
  std::optional<Eigen::VectorXd> r = residuals(base, measured);
  if (!r) {
    // Taking the cost model's predictions as profiles made a measured placement untimeable: fit
    // nothing rather than something else.
    RefitResult none{Simulator(model), {}, 0.0, 0.0, 0, false, false};
    return none;
  }
  const double before = rms_log_error(*r, measured);
  auto objective = [&](const Eigen::VectorXd& res, const Eigen::VectorXd& t) {
    return res.squaredNorm() + (prior.array() * t.array().square()).sum();
  };
  double current = objective(*r, theta);
  double lambda = 1e-2;
  const auto N = static_cast<Eigen::Index>(measured.size());
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options.max_seconds));
  bool timed_out = false;
  size_t steps = 0;
  auto out_of_time = [&] {
    timed_out =
        timed_out || (options.max_seconds > 0 && std::chrono::steady_clock::now() > deadline);
    return timed_out;
  };
  for (int it = 0; it < options.iterations && K > 0 && N > 0 && !out_of_time(); ++it) {
    Eigen::MatrixXd J(N, K);
    for (Eigen::Index k = 0; k < K && !out_of_time(); ++k) {
      Eigen::VectorXd t = theta;
      t[k] += options.step;
      const std::optional<Eigen::VectorXd> rk = residuals(scaled(model, f, t), measured);
      J.col(k) = rk ? Eigen::VectorXd((*rk - *r) / options.step) : Eigen::VectorXd::Zero(N);
    }
    if (timed_out) break;
    const Eigen::MatrixXd JtJ = J.transpose() * J;
    const Eigen::VectorXd gradient =
        J.transpose() * *r + Eigen::VectorXd(prior.cwiseProduct(theta));
    bool improved = false;
    // Levenberg–Marquardt: a step that does not lower the objective is retried shorter.
    for (int tries = 0; tries < 6 && !improved && !out_of_time(); ++tries) {
      Eigen::MatrixXd A = JtJ;
      A.diagonal().array() += prior.array() + lambda * (JtJ.diagonal().array() + prior.array());
      const Eigen::LDLT<Eigen::MatrixXd> solver(A);  // A is positive definite: prior > 0
      const Eigen::VectorXd delta = solver.solve(-gradient);
      if (solver.info() != Eigen::Success || !delta.allFinite()) break;
      Eigen::VectorXd next = theta + delta;
      // A factor beyond 20x either way is not what a profile or a preset gets wrong.
      next = next.cwiseMax(-3.0).cwiseMin(3.0);
      Simulator candidate = scaled(model, f, next);
      const std::optional<Eigen::VectorXd> rn = residuals(candidate, measured);
      if (rn && objective(*rn, next) < current) {
        theta = next;
        r = rn;
        current = objective(*rn, next);
        base = std::move(candidate);
        lambda = std::max(1e-4, lambda / 3);
        improved = true;
        ++steps;
      } else {
        lambda *= 4;
      }
    }
    if (!improved) break;
  }

  RefitResult out{std::move(base), {},        before,   rms_log_error(*r, measured),
                  measured.size(), timed_out, steps > 0};
  for (Eigen::Index k = 0; k < K; ++k)
    if (std::abs(theta[k]) > std::log(1.01))
      out.factors.push_back({f.names[static_cast<size_t>(k)], std::exp(theta[k])});
  std::sort(out.factors.begin(), out.factors.end(), [](const RefitFactor& a, const RefitFactor& b) {
    return std::abs(std::log(a.scale)) > std::abs(std::log(b.scale));
  });
  return out;
}

}  // namespace placementd::sim
