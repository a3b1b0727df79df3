#include "live/trial.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <utility>

namespace placementd {

namespace {

// Windows go C I | I C | C I | …: pairs alternate which arm runs first, so a linear drift within
// a pair cancels over two pairs, and arms swap once per window pair after the first.
int arm_of_window(int64_t window) {
  const bool challenger_first = (window / 2) % 2 == 0;
  const bool first = window % 2 == 0;
  return first == challenger_first ? 1 : 0;
}

// The signed-rank null distribution of n pairs: P(W+ = w) for w = 0 … n(n+1)/2. Adding pair k
// either leaves W+ (its sign negative) or adds k (positive), each with probability 1/2.
std::vector<double> signed_rank_pmf(int n) {
  const int64_t total = static_cast<int64_t>(n) * (n + 1) / 2;
  std::vector<double> p(static_cast<size_t>(total) + 1, 0.0);
  p[0] = 1.0;
  int64_t reach = 0;
  for (int k = 1; k <= n; ++k) {
    reach += k;
    for (int64_t w = reach; w >= 0; --w) p[w] = 0.5 * (p[w] + (w >= k ? p[w - k] : 0.0));
  }
  return p;
}

// The largest w with P(W+ <= w) <= alpha, or -1 when even W+ = 0 is likelier than alpha. A trial
// looks at the same few pair counts at the same α over and over: the distribution is computed once
// per (n, α) and process.
int64_t critical_value(int n, double alpha) {
  static std::mutex mutex;
  static std::map<std::pair<int, double>, int64_t> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find({n, alpha}); it != cache.end()) return it->second;
  const std::vector<double> p = signed_rank_pmf(n);
  int64_t w = -1;
  double cdf = 0.0;
  while (w + 1 < static_cast<int64_t>(p.size()) && cdf + p[w + 1] <= alpha) cdf += p[++w];
  cache[{n, alpha}] = w;
  return w;
}

}  // namespace

const char* to_string(TrialVerdict v) {
  switch (v) {
    case TrialVerdict::kFaster:
      return "faster";
    case TrialVerdict::kNotFaster:
      return "not faster";
    case TrialVerdict::kUnclear:
      return "unclear";
    case TrialVerdict::kFasterByEstimate:
      return "faster by its estimate";
    case TrialVerdict::kUndecided:
      break;
  }
  return "undecided";
}

double signed_rank_cdf(int n, int64_t w) {
  if (w < 0) return 0.0;
  const std::vector<double> p = signed_rank_pmf(n);
  double cdf = 0.0;
  for (int64_t i = 0; i <= w && i < static_cast<int64_t>(p.size()); ++i) cdf += p[i];
  return std::min(cdf, 1.0);
}

std::optional<ShiftInterval> signed_rank_interval(const std::vector<double>& d, double alpha) {
  const int n = static_cast<int>(d.size());
  if (n == 0) return std::nullopt;
  const int64_t c = critical_value(n, alpha);
  if (c < 0) return std::nullopt;
  std::vector<double> walsh;
  walsh.reserve(static_cast<size_t>(n) * (n + 1) / 2);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) walsh.push_back(0.5 * (d[i] + d[j]));
  std::sort(walsh.begin(), walsh.end());
  const size_t m = walsh.size();
  ShiftInterval out;
  out.estimate = m % 2 == 1 ? walsh[m / 2] : 0.5 * (walsh[m / 2 - 1] + walsh[m / 2]);
  // [W(c+1), W(m-c)] (1-based) covers the center with 1 - 2 P(W+ <= c).
  out.low = walsh[static_cast<size_t>(c)];
  out.high = walsh[m - 1 - static_cast<size_t>(c)];
  return out;
}

double window_log_center(std::vector<double> steps) {
  std::sort(steps.begin(), steps.end());
  const size_t cut = steps.size() / 4;
  const auto first = steps.begin() + static_cast<std::ptrdiff_t>(cut);
  const auto last = steps.end() - static_cast<std::ptrdiff_t>(cut);
  return std::log(std::accumulate(first, last, 0.0) / static_cast<double>(last - first));
}

std::vector<int64_t> TrialPlan::looks() const {
  // n pairs cannot reach α below 2^-n (all n differences of one sign is the smallest p-value), so
  // the first look waits for enough pairs to decide at the α each look gets; that α depends on
  // how many looks there are, hence the second pass.
  const int64_t steps_cap = max_steps / (2 * std::max<int64_t>(window_steps, 1));
  int64_t first = 8;
  std::vector<int64_t> out;
  for (int pass = 0; pass < 2; ++pass) {
    out.clear();
    const int64_t cap = std::max(steps_cap, first);  // a trial that cannot say "faster" is no trial
    for (int64_t n = first; n < cap; n *= 2) out.push_back(n);
    out.push_back(cap);
    const double alpha = (1.0 - confidence) / static_cast<double>(out.size());
    first = std::max<int64_t>(8, static_cast<int64_t>(std::ceil(-std::log2(alpha))));
  }
  return out;
}

double TrialPlan::alpha_per_look() const {
  return (1.0 - confidence) / static_cast<double>(looks().size());
}

Trial::Trial(uint64_t incumbent, uint64_t challenger, TrialPlan plan, bool final_check)
    : ids_{incumbent, challenger},
      plan_(plan),
      final_check_(final_check),
      looks_(plan_.looks()),
      alpha_(plan_.alpha_per_look()) {}

uint64_t Trial::running() const { return ids_[arm_of_window(window_)]; }

bool Trial::add(uint64_t candidate, double step_time_s) {
  if (candidate != running()) return false;
  window_steps_.push_back(step_time_s);
  return static_cast<int64_t>(window_steps_.size()) >= plan_.window_steps;
}

TrialVerdict Trial::close_window() {
  if (window_steps_.empty()) return TrialVerdict::kUndecided;
  const int arm = arm_of_window(window_);
  measured_ += static_cast<int64_t>(window_steps_.size());
  const double center = window_log_center(std::move(window_steps_));
  window_steps_.clear();
  ++window_;
  if (!pending_) {
    pending_ = center;
    return TrialVerdict::kUndecided;
  }
  differences_.push_back(arm == 1 ? center - *pending_ : *pending_ - center);
  pending_.reset();
  if (next_look_ >= looks_.size() || pairs() < looks_[next_look_]) return TrialVerdict::kUndecided;
  ++next_look_;
  last_ = signed_rank_interval(differences_, alpha_);
  if (last_ && last_->high < 0.0) return TrialVerdict::kFaster;
  // Giving up early only costs a chance at a gain, never a wrong placement: the futility bound
  // needs no Bonferroni share, and a loose one spares the job most of an equal challenger's trial.
  const std::optional<ShiftInterval> futility =
      signed_rank_interval(differences_, plan_.futility_alpha);
  if (futility && futility->low > -std::log1p(plan_.min_gain)) return TrialVerdict::kNotFaster;
  return next_look_ >= looks_.size() ? TrialVerdict::kUnclear : TrialVerdict::kUndecided;
}

TrialVerdict Trial::by_estimate() {
  // Before the first look there are too few pairs for any interval: no estimate to go by.
  if (!last_) return TrialVerdict::kUnclear;
  if (std::optional<ShiftInterval> now = signed_rank_interval(differences_, alpha_)) last_ = now;
  return last_->estimate < 0.0 ? TrialVerdict::kFasterByEstimate : TrialVerdict::kUnclear;
}

double Trial::p_faster() const {
  const int n = static_cast<int>(differences_.size());
  if (n == 0) return 1.0;
  // W+: the ranks (by |d|) of the pairs where the challenger ran slower, or no faster (a tie
  // counts against it); small when it is faster.
  std::vector<size_t> order(differences_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::fabs(differences_[a]) < std::fabs(differences_[b]);
  });
  int64_t w_plus = 0;
  for (size_t rank = 0; rank < order.size(); ++rank)
    if (differences_[order[rank]] >= 0.0) w_plus += static_cast<int64_t>(rank) + 1;
  return std::min(1.0, signed_rank_cdf(n, w_plus) * static_cast<double>(looks_.size()));
}

}  // namespace placementd
