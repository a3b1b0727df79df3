#include "timeline_plot.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "placement/serialization.h"
#include "svg_plot.h"

namespace placementctl {

namespace msg = placement::messages;

namespace {

constexpr double W = 1000, H = 520, kLeft = 80, kRight = 250, kTop = 70, kBottom = 50;
constexpr const char* kInForce = "#1f77b4";
constexpr const char* kExploring = "#ff7f0e";
constexpr const char* kMerged = "#9a9a9a";
constexpr const char* kBest = "#2ca02c";
constexpr const char* kStart = "#7f7f7f";
constexpr const char* kFaster = "#2ca02c";
constexpr const char* kNotFaster = "#d62728";
constexpr const char* kUnclear = "#9467bd";
// Verdicts beyond this many are marked without their labels, which would only overlap.
constexpr size_t kMaxLabels = 40;

struct Axes {
  double steps = 1, lo = 0, hi = 1;
  double x(double step) const { return kLeft + (W - kLeft - kRight) * step / steps; }
  double y(double v) const {
    return kTop + (H - kTop - kBottom) * (1.0 - (std::min(v, hi) - lo) / (hi - lo));
  }
};

// The y range: the stretches' means up to their 98th percentile (a swap's warm-up step or a spike
// would squash the rest), the best-known levels and the start.
Axes axes_of(const msg::JobInfo& job, const std::vector<double>& levels) {
  Axes a;
  std::vector<double> means;
  for (const msg::TimelinePoint& p : job.timeline) means.push_back(p.mean_step_time_s);
  if (!job.timeline.empty())
    a.steps = static_cast<double>(job.timeline.back().first_step + job.timeline.back().steps);
  std::sort(means.begin(), means.end());
  std::vector<double> shown = levels;
  if (!means.empty()) {
    shown.push_back(means.front());
    shown.push_back(means[std::min(means.size() - 1, means.size() * 98 / 100)]);
  }
  if (job.job.start_step_time_s) shown.push_back(*job.job.start_step_time_s);
  if (shown.empty()) return a;
  a.lo = *std::min_element(shown.begin(), shown.end());
  a.hi = *std::max_element(shown.begin(), shown.end());
  if (a.hi <= a.lo) a.hi = a.lo * 1.1 + 1e-9;
  const double pad = (a.hi - a.lo) * 0.08;
  a.lo = std::max(0.0, a.lo - pad);
  a.hi += pad;
  return a;
}

std::string line(const char* cls, double x1, double y1, double x2, double y2, const char* colour,
                 const std::string& extra = "") {
  return "<line class=\"" + std::string(cls) + "\" x1=\"" + svg_number(x1) + "\" y1=\"" +
         svg_number(y1) + "\" x2=\"" + svg_number(x2) + "\" y2=\"" + svg_number(y2) +
         "\" stroke=\"" + colour + "\"" + extra + "/>\n";
}

}  // namespace

void write_timeline_svg(const std::string& path, const msg::JobInfo& job) {
  std::map<uint64_t, std::optional<double>> median;
  for (const msg::CandidateInfo& c : job.candidates) median[c.id] = c.median_step_time_s;
  // The best known over the steps: the placement in force's median, changing where a trial moved
  // it.
  struct Level {
    double from, to, value;
    uint64_t best;
  };
  std::vector<Level> best;
  for (const msg::TimelinePoint& p : job.timeline) {
    const auto it = median.find(p.best);
    if (it == median.end() || !it->second) continue;
    const double from = static_cast<double>(p.first_step), to = from + p.steps;
    if (!best.empty() && best.back().best == p.best)
      best.back().to = to;
    else
      best.push_back({from, to, *it->second, p.best});
  }
  std::vector<double> levels;
  for (const Level& l : best) levels.push_back(l.value);
  const Axes a = axes_of(job, levels);

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text class=\"title\" x=\"" << kLeft << "\" y=\"22\" font-size=\"15\">"
      << svg_escape("job " + std::to_string(job.job.id) + " '" + job.job.name +
                    "': step time over its steps")
      << "</text>\n"
      << line("axis", kLeft, H - kBottom, W - kRight, H - kBottom, "black")
      << line("axis", kLeft, kTop, kLeft, H - kBottom, "black");
  for (int k = 0; k <= 4; ++k) {
    const double v = a.lo + (a.hi - a.lo) * k / 4;
    svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << svg_number(a.y(v) + 4)
        << "\" text-anchor=\"end\">" << svg_ms(v) << "</text>\n";
    const double s = a.steps * k / 4;
    svg << "<text x=\"" << svg_number(a.x(s)) << "\" y=\"" << H - kBottom + 16
        << "\" text-anchor=\"middle\">" << static_cast<uint64_t>(s) << "</text>\n";
  }
  svg << "<text class=\"x-label\" x=\"" << (kLeft + W - kRight) / 2 << "\" y=\"" << H - 12
      << "\" text-anchor=\"middle\">step</text>\n"
      << "<text class=\"y-label\" x=\"16\" y=\"" << (kTop + H - kBottom) / 2
      << "\" transform=\"rotate(-90 16 " << (kTop + H - kBottom) / 2
      << ")\" text-anchor=\"middle\">step time (mean of each stretch)</text>\n";
  // The steps: one segment a stretch, at its mean, coloured by what ran.
  for (const msg::TimelinePoint& p : job.timeline) {
    const char* cls = p.placement == 0        ? "stretch merged"
                      : p.placement == p.best ? "stretch in-force"
                                              : "stretch exploring";
    const char* colour = p.placement == 0 ? kMerged : p.placement == p.best ? kInForce : kExploring;
    const double x1 = a.x(static_cast<double>(p.first_step));
    const double x2 = std::max(a.x(static_cast<double>(p.first_step + p.steps)), x1 + 1.5);
    svg << line(cls, x1, a.y(p.mean_step_time_s), x2, a.y(p.mean_step_time_s), colour,
                " stroke-width=\"3\" data-placement=\"" + std::to_string(p.placement) +
                    "\" data-steps=\"" + std::to_string(p.steps) + "\"");
  }
  if (job.job.start_step_time_s)
    svg << line("start", kLeft, a.y(*job.job.start_step_time_s), W - kRight,
                a.y(*job.job.start_step_time_s), kStart, " stroke-dasharray=\"6,4\"");
  // The best known: a step line, level while no trial moves it.
  std::string points;
  for (const Level& l : best)
    points += svg_number(a.x(l.from)) + "," + svg_number(a.y(l.value)) + " " +
              svg_number(a.x(l.to)) + "," + svg_number(a.y(l.value)) + " ";
  if (!points.empty())
    svg << "<polyline class=\"best-known\" fill=\"none\" stroke=\"" << kBest
        << "\" stroke-width=\"2\" points=\"" << points << "\"/>\n";
  // Each trial's verdict where it was reached, labelled on three rows above the plot.
  size_t labelled = 0;
  for (const msg::TrialMark& t : job.trials) {
    // A long trial that kept its challenger for its estimate's side changed the incumbent too.
    const bool by_estimate = t.verdict == "faster by its estimate";
    const bool faster = t.verdict == "faster" || by_estimate;
    const std::string kind = faster                      ? "faster"
                             : t.verdict == "not faster" ? "not-faster"
                                                         : "unclear";
    const char* colour = faster ? kFaster : kind == "not-faster" ? kNotFaster : kUnclear;
    const char* said = by_estimate            ? " faster (estimate)"
                       : faster               ? " faster"
                       : kind == "not-faster" ? " not"
                                              : " unclear";
    const double x = a.x(static_cast<double>(t.step));
    svg << line(("verdict " + kind).c_str(), x, kTop, x, H - kBottom, colour,
                " stroke-dasharray=\"2,3\" data-candidate=\"" + std::to_string(t.candidate) +
                    "\" data-step=\"" + std::to_string(t.step) + "\"");
    if (labelled++ < kMaxLabels)
      svg << "<text class=\"verdict-label\" x=\"" << svg_number(x) << "\" y=\""
          << kTop - 8 - 13 * (labelled % 3) << "\" text-anchor=\"middle\" fill=\"" << colour
          << "\" font-size=\"11\">" << t.candidate << said << (t.final_check ? " (final)" : "")
          << "</text>\n";
  }
  // The legend.
  const double lx = W - kRight + 16;
  double ly = kTop + 4;
  auto entry = [&](const char* colour, const std::string& text, const char* dash) {
    svg << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 22 << "\" y2=\"" << ly
        << "\" stroke=\"" << colour << "\" stroke-width=\"3\"" << dash << "/>\n"
        << "<text class=\"legend\" x=\"" << lx + 28 << "\" y=\"" << ly + 4 << "\">"
        << svg_escape(text) << "</text>\n";
    ly += 20;
  };
  entry(kInForce, "placement in force", "");
  entry(kExploring, "exploring (candidates, trials)", "");
  entry(kMerged, "several (merged stretch)", "");
  entry(kBest, "best known", "");
  entry(kStart, "start placement", " stroke-dasharray=\"6,4\"");
  entry(kFaster, "trial: faster, or by its estimate (id)", " stroke-dasharray=\"2,3\"");
  entry(kNotFaster, "trial: not faster (id not)", " stroke-dasharray=\"2,3\"");
  entry(kUnclear, "trial: unclear at its cap", " stroke-dasharray=\"2,3\"");
  svg << "</svg>\n";
  placement::write_file_atomically(path, svg.str());
}

}  // namespace placementctl
