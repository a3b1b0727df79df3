#pragma once
// Which measured candidate is fastest, when measurement noise is larger than the differences
// between the best candidates. The lowest single measurement among many near-equal candidates is
// the luckiest, not the fastest (the winner's curse): with 2% noise on 100 candidates it picks one
// ~2.5 standard deviations lucky, while the candidates near the optimum differ by 0.1–0.5%.
//
// Each candidate also has the model's prediction (the simulator every planner uses). A model is
// off from the truth by an error that is nearly the same for two similar placements and unrelated
// for two different ones, so the log ratio measured/predicted is treated as a Gaussian process over
// placements (kriging): a constant calibration, plus a model error whose correlation decays
// exponentially with the share of ops two placements put on different devices and as a Gaussian
// with the difference of their log predicted times (placements the model predicts alike share
// their bottleneck, and with it the model's error), plus the known measurement noise. Its size and
// correlation lengths are fitted by marginal likelihood among the contenders (the candidates whose
// measurement leaves a chance that they are the fastest). A candidate's estimate is its prediction
// corrected by what the measurements of it and its neighbours say about the model there: where the
// model has proven exact the prediction ranks, where it is poor the measurements rank, and a
// placement measured once borrows from many similar ones.

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

namespace placementd::sim {

class ModelAssistedSelection {
 public:
  /// Below this many candidates the model's error cannot be estimated: measurements rank alone.
  static constexpr size_t kMinCandidates = 8;
  /// A contender measured within this many standard deviations of noise (its own plus the lowest
  /// measurement's) of the lowest measurement: it may be the fastest. The model is fitted among the
  /// contenders, and the best is one of them.
  static constexpr double kContenderSigmas = 4.0;

  /// Keeps at most `max_candidates` (the ones the model predicts fastest: chosen on the model, not
  /// on the noisy measurements, so the choice does not favour lucky ones).
  explicit ModelAssistedSelection(size_t max_candidates = 256);
  ~ModelAssistedSelection();
  ModelAssistedSelection(ModelAssistedSelection&&) noexcept;
  ModelAssistedSelection& operator=(ModelAssistedSelection&&) noexcept;

  /// A candidate (its device per op, all of the same length) the model predicts at `predicted_s`
  /// and that measured `measured_s`, with the measurement's relative standard deviation (0: exact).
  /// `tag` is the caller's name for it. Throws std::invalid_argument, keeping what was added
  /// before, for a time that is not positive and finite, a negative or infinite noise, or a
  /// placement of another length.
  void add(std::vector<int> device_of_op, double predicted_s, double measured_s, double noise,
           size_t tag);

  struct Best {
    size_t tag;
    const std::vector<int>* device_of_op;
    /// Its estimated step time.
    double estimate_s;
  };
  /// The candidate with the lowest estimate; nullopt before the first.
  std::optional<Best> best() const;
  /// Candidates kept (at most max_candidates).
  size_t size() const;
  /// The model's relative error and its correlation length (share of ops moved) as fitted among
  /// the contenders; nullopt while there are fewer than kMinCandidates of them, or when the noise
  /// is nil (measurements rank alone then).
  std::optional<double> model_error() const;
  std::optional<double> correlation_length() const;
  /// The model error's correlation length in log predicted step time (infinite: unrelated to it).
  std::optional<double> time_correlation_length() const;

 private:
  struct State;
  void refit(bool hyperparameters);

  size_t max_candidates_;
  std::unique_ptr<State> state_;
};

}  // namespace placementd::sim
