// A tiny SVG writer for the examples' pictures (no dependency): a document to
// draw lines, polylines, circles, rectangles and text into, a mapping from
// simulation coordinates to the picture, colour scales, and a loss-curve
// chart. Header-only; only the examples use it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace svg {

// "#rrggbb" from components in [0, 1].
inline std::string rgb(double r, double g, double b) {
  auto byte = [](double c) { return int(std::lround(255 * std::clamp(c, 0.0, 1.0))); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", byte(r), byte(g), byte(b));
  return buf;
}

// Blue (-1) through `mid` (0) to red (+1); mid is white for maps of a field,
// grey for lines and dots drawn on white.
inline std::string diverging(double t, double mid = 1.0) {
  t = std::clamp(t, -1.0, 1.0);
  double const lo[3] = {0.15, 0.35, 0.85}, hi[3] = {0.85, 0.2, 0.15};
  double const* end = t < 0 ? lo : hi;
  double const a = std::abs(t);
  return rgb(mid + (end[0] - mid) * a, mid + (end[1] - mid) * a, mid + (end[2] - mid) * a);
}

// A number as SVG wants it: short, and never in a locale's format.
inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

inline std::string escape(std::string const& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// An SVG picture of width x height pixels; y grows downwards, as in SVG.
class document {
 public:
  document(double width, double height) : width_(width), height_(height) {
    rect(0, 0, width, height, "#ffffff");
  }

  void line(double x1, double y1, double x2, double y2, std::string const& stroke, double width = 1,
            double opacity = 1) {
    body_ << "<line x1=\"" << num(x1) << "\" y1=\"" << num(y1) << "\" x2=\"" << num(x2) << "\" y2=\"" << num(y2)
          << "\" stroke=\"" << stroke << "\" stroke-width=\"" << num(width) << "\"" << opacity_attr(opacity)
          << "/>\n";
  }
  void polyline(std::vector<std::pair<double, double>> const& points, std::string const& stroke, double width = 1,
                double opacity = 1) {
    body_ << "<polyline fill=\"none\" stroke=\"" << stroke << "\" stroke-width=\"" << num(width) << "\""
          << opacity_attr(opacity) << " points=\"";
    for (auto const& [x, y] : points) body_ << num(x) << ',' << num(y) << ' ';
    body_ << "\"/>\n";
  }
  void circle(double cx, double cy, double r, std::string const& fill, std::string const& stroke = "none",
              double opacity = 1) {
    body_ << "<circle cx=\"" << num(cx) << "\" cy=\"" << num(cy) << "\" r=\"" << num(r) << "\" fill=\"" << fill
          << "\" stroke=\"" << stroke << "\"" << opacity_attr(opacity) << "/>\n";
  }
  void rect(double x, double y, double w, double h, std::string const& fill, std::string const& stroke = "none") {
    body_ << "<rect x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w) << "\" height=\"" << num(h)
          << "\" fill=\"" << fill << "\"";
    if (stroke != "none") body_ << " stroke=\"" << stroke << "\"";
    body_ << "/>\n";
  }
  // anchor: "start", "middle" or "end".
  void text(double x, double y, std::string const& s, double size = 14, std::string const& anchor = "start",
            std::string const& fill = "#222222") {
    body_ << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" font-family=\"sans-serif\" font-size=\""
          << num(size) << "\" text-anchor=\"" << anchor << "\" fill=\"" << fill << "\">" << escape(s)
          << "</text>\n";
  }

  // A map of a rows x cols array (row 0 at the top) in the rectangle at
  // (x, y) of size w x h, coloured by diverging(value / scale). Colours are
  // rounded to a few levels so that runs of equal colour become one rectangle.
  void heatmap(std::vector<double> const& values, int rows, int cols, double x, double y, double w, double h,
               double scale) {
    int const levels = 8;  // on each side of zero
    double const cw = w / cols, ch = h / rows;
    auto level = [&](double v) { return int(std::lround(std::clamp(v / scale, -1.0, 1.0) * levels)); };
    body_ << "<g shape-rendering=\"crispEdges\">\n";
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols;) {
        int const l = level(values[std::size_t(r * cols + c)]);
        int e = c + 1;
        while (e < cols && level(values[std::size_t(r * cols + e)]) == l) ++e;
        rect(x + c * cw, y + r * ch, (e - c) * cw, ch, diverging(double(l) / levels));
        c = e;
      }
    body_ << "</g>\n";
  }

  // Column `column` of a row of 300 x 300 panels (a 960 x 370 document holds
  // three): the map of a rows x cols array scaled to its largest magnitude,
  // under its title.
  void panel(int column, std::vector<double> const& values, int rows, int cols, std::string const& title) {
    double scale = 1e-12;
    for (double v : values) scale = std::max(scale, std::abs(v));
    heatmap(values, rows, cols, 10 + 320 * column, 50, 300, 300, scale);
    text(160 + 320 * column, 38, title, 14, "middle");
  }

  double width() const { return width_; }
  double height() const { return height_; }

  // Writes the file; false (with a message) when it cannot.
  bool save(std::string const& path) const {
    std::ofstream out(path);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width_) << "\" height=\"" << num(height_)
        << "\" viewBox=\"0 0 " << num(width_) << ' ' << num(height_) << "\">\n"
        << body_.str() << "</svg>\n";
    if (!out) std::fprintf(stderr, "could not write %s\n", path.c_str());
    return bool(out);
  }

 private:
  static std::string opacity_attr(double opacity) {
    return opacity < 1 ? " stroke-opacity=\"" + num(opacity) + "\" fill-opacity=\"" + num(opacity) + "\"" : "";
  }
  double width_, height_;
  std::ostringstream body_;
};

// Maps a rectangle of simulation coordinates (y up) onto a rectangle of the
// picture (y down), keeping the aspect ratio.
struct view {
  double x0, y0, x1, y1;          // simulation coordinates shown
  double left, top, width, height;  // where in the picture
  double scale() const { return std::min(width / (x1 - x0), height / (y1 - y0)); }
  double px(double x) const { return left + (x - x0) * scale(); }
  double py(double y) const { return top + height - (y - y0) * scale(); }
};

// A chart of the loss per iteration, on a log scale when the loss is positive.
inline bool write_loss_curve(std::string const& path, std::vector<double> const& loss, std::string const& title) {
  document doc(640, 400);
  double const left = 80, right = 620, top = 40, bottom = 350;
  bool const log_scale = !loss.empty() && *std::min_element(loss.begin(), loss.end()) > 0;
  auto value = [&](double l) { return log_scale ? std::log10(l) : l; };
  double lo = 0, hi = 1;
  if (!loss.empty()) {
    lo = hi = value(loss[0]);
    for (double l : loss) lo = std::min(lo, value(l)), hi = std::max(hi, value(l));
  }
  if (log_scale) lo = std::floor(lo), hi = std::ceil(hi);
  if (hi - lo < 1e-12) hi = lo + 1;
  auto px = [&](double i) { return left + (right - left) * i / std::max<double>(1, double(loss.size()) - 1); };
  auto py = [&](double v) { return bottom - (bottom - top) * (v - lo) / (hi - lo); };

  doc.text(320, 24, title, 16, "middle");
  doc.line(left, bottom, right, bottom, "#444444");
  doc.line(left, top, left, bottom, "#444444");
  doc.text((left + right) / 2, 390, "iteration", 13, "middle");
  doc.text(left - 10, top - 10, log_scale ? "loss (log scale)" : "loss", 13, "start");
  // Horizontal grid lines with labels: decades on a log scale, five steps otherwise.
  int const ticks = log_scale ? int(hi - lo) : 5;
  for (int k = 0; k <= ticks; ++k) {
    double const v = lo + (hi - lo) * k / std::max(1, ticks);
    char label[32];
    std::snprintf(label, sizeof label, "%.3g", log_scale ? std::pow(10.0, v) : v);
    doc.line(left, py(v), right, py(v), "#dddddd");
    doc.text(left - 6, py(v) + 4, label, 11, "end");
  }
  for (int k = 0; k <= 4; ++k) {
    double const i = (double(loss.size()) - 1) * k / 4;
    char label[32];
    std::snprintf(label, sizeof label, "%d", int(std::lround(i)));
    doc.text(px(i), bottom + 16, label, 11, "middle");
  }
  std::vector<std::pair<double, double>> points;
  for (std::size_t i = 0; i < loss.size(); ++i) points.emplace_back(px(double(i)), py(value(loss[i])));
  doc.polyline(points, "#c0392b", 2);
  return doc.save(path);
}

}  // namespace svg
