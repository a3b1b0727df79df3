#include "svg_plot.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "placement/serialization.h"

namespace placementctl {

std::string svg_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string svg_ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g ms", seconds * 1e3);
  return buf;
}

void write_curve_svg(const std::string& path, const CurvePlot& plot) {
  constexpr double W = 900, H = 500, left = 80, right = 200, top = 40, bottom = 50;
  double lo = 0, hi = 0;
  bool any = false;
  auto include = [&](double v) {
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  };
  for (const auto& s : plot.samples)
    if (s) include(*s);
  for (const auto& [label, v] : plot.references) include(v);
  if (!any) lo = 0, hi = 1;
  if (hi <= lo) hi = lo + 1e-9 + lo * 0.1;
  const double pad = (hi - lo) * 0.05;
  lo = std::max(0.0, lo - pad);
  hi += pad;
  const size_t n = std::max<size_t>(plot.samples.size(), 1);
  auto x = [&](size_t i) {
    return left + (W - left - right) * (n == 1 ? 0.5 : static_cast<double>(i) / (n - 1));
  };
  auto y = [&](double v) { return top + (H - top - bottom) * (1.0 - (v - lo) / (hi - lo)); };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">" << svg_escape(plot.title)
      << "</text>\n"
      << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\""
      << H - bottom << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << top
      << "\" x2=\"" << left << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4;
    svg << "<text x=\"" << left - 6 << "\" y=\"" << svg_number(y(v) + 4)
        << "\" text-anchor=\"end\">" << svg_ms(v) << "</text>\n";
  }
  svg << "<text x=\"" << left << "\" y=\"" << H - bottom + 18 << "\">1</text>\n<text x=\""
      << W - right << "\" y=\"" << H - bottom + 18 << "\" text-anchor=\"end\">"
      << plot.samples.size() << "</text>\n<text x=\"" << (left + W - right) / 2 << "\" y=\""
      << H - 12 << "\" text-anchor=\"middle\">" << svg_escape(plot.x_label) << "</text>\n";
  for (size_t i = 0; i < plot.samples.size(); ++i) {
    if (plot.samples[i])
      svg << "<circle cx=\"" << svg_number(x(i)) << "\" cy=\"" << svg_number(y(*plot.samples[i]))
          << "\" r=\"2\" fill=\"#7aa6d6\"/>\n";
    else
      svg << "<line x1=\"" << svg_number(x(i)) << "\" y1=\"" << top << "\" x2=\""
          << svg_number(x(i)) << "\" y2=\"" << top + 6 << "\" stroke=\"#d62728\"/>\n";
  }
  std::string points;
  for (size_t i = 0; i < plot.best.size(); ++i)
    if (plot.best[i]) points += svg_number(x(i)) + "," + svg_number(y(*plot.best[i])) + " ";
  if (!points.empty())
    svg << "<polyline fill=\"none\" stroke=\"#1f4e9c\" stroke-width=\"2\" points=\"" << points
        << "\"/>\n";
  const char* colours[] = {"#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                           "#e377c2", "#7f7f7f", "#bcbd22"};
  for (size_t r = 0; r < plot.references.size(); ++r) {
    const auto& [label, v] = plot.references[r];
    const char* colour = colours[r % (sizeof(colours) / sizeof(*colours))];
    svg << "<line x1=\"" << left << "\" y1=\"" << svg_number(y(v)) << "\" x2=\"" << W - right
        << "\" y2=\"" << svg_number(y(v)) << "\" stroke=\"" << colour
        << "\" stroke-dasharray=\"5,4\"/>\n<text x=\"" << W - right + 6 << "\" y=\""
        << svg_number(y(v) + 4) << "\" fill=\"" << colour << "\">" << svg_escape(label) << " "
        << svg_ms(v) << "</text>\n";
  }
  svg << "<text x=\"" << W - right + 6 << "\" y=\"" << top
      << "\" fill=\"#1f4e9c\">best so far</text>\n</svg>\n";
  placement::write_file_atomically(path, svg.str());
}

}  // namespace placementctl
