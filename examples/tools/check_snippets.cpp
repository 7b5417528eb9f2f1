// Keeps the code in docs/*.md and README.md identical to the files CTest
// builds and runs.
//
// In the markdown, a code block preceded by
//     <!-- snippet: examples/snippets/kernels.cpp#loops -->
// must hold exactly the lines between `// [snippet: loops]` and
// `// [snippet end]` in that file (dedented); without `#name`, the whole file.
// Every ```cpp block needs such a line.
//
//   ctgrad_check_snippets <source dir>            check (what CTest runs)
//   ctgrad_check_snippets <source dir> --update   rewrite the blocks from the files
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_lines(fs::path const& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool blank(std::string const& s) { return s.find_first_not_of(" \t") == std::string::npos; }

// The lines of a region (or of the whole file), without their common indentation.
std::optional<std::vector<std::string>> excerpt(fs::path const& file, std::string const& name, std::string& why) {
  if (!fs::exists(file)) {
    why = "no such file " + file.string();
    return std::nullopt;
  }
  auto const lines = read_lines(file);
  std::vector<std::string> out;
  if (name.empty()) {
    out = lines;
  } else {
    std::string const open = "[snippet: " + name + "]";
    auto it = std::find_if(lines.begin(), lines.end(),
                           [&](auto const& l) { return l.find(open) != std::string::npos; });
    if (it == lines.end()) {
      why = "no line '" + open + "' in " + file.string();
      return std::nullopt;
    }
    for (++it; it != lines.end() && it->find("[snippet end]") == std::string::npos; ++it) {
      if (it->find("[snippet: ") != std::string::npos) {
        why = "region '" + name + "' in " + file.string() + " holds another region";
        return std::nullopt;
      }
      out.push_back(*it);
    }
    if (it == lines.end()) {
      why = "region '" + name + "' in " + file.string() + " has no '[snippet end]'";
      return std::nullopt;
    }
  }
  while (!out.empty() && blank(out.back())) out.pop_back();
  std::size_t indent = std::string::npos;
  for (auto const& l : out)
    if (!blank(l)) indent = std::min(indent, l.find_first_not_of(' '));
  for (auto& l : out) l = blank(l) ? std::string() : l.substr(indent == std::string::npos ? 0 : indent);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <source dir> [--update]\n", argv[0]);
    return 2;
  }
  fs::path const root = argv[1];
  bool const update = argc > 2 && std::string(argv[2]) == "--update";
  std::vector<fs::path> docs;
  for (auto const& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path());
  std::sort(docs.begin(), docs.end());
  docs.push_back(root / "README.md");

  int problems = 0, checked = 0;
  std::string const marker = "<!-- snippet: ";
  for (auto const& doc : docs) {
    auto lines = read_lines(doc);
    bool changed = false;
    auto complain = [&](std::size_t line, std::string const& what) {
      std::fprintf(stderr, "%s:%zu: %s\n", doc.string().c_str(), line + 1, what.c_str());
      ++problems;
    };
    for (std::size_t k = 0; k < lines.size(); ++k) {
      std::string const& line = lines[k];
      if (line.rfind("```cpp", 0) == 0 && (k == 0 || lines[k - 1].rfind(marker, 0) != 0)) {
        complain(k, "a ```cpp block without a '<!-- snippet: file#name -->' line before it");
        continue;
      }
      if (line.rfind(marker, 0) != 0) continue;
      std::size_t const end = line.find(" -->");
      std::string const ref =
          line.substr(marker.size(), end == std::string::npos ? std::string::npos : end - marker.size());
      std::size_t const hash = ref.find('#');
      std::string const file = ref.substr(0, hash), name = hash == std::string::npos ? "" : ref.substr(hash + 1);
      if (k + 1 >= lines.size() || lines[k + 1].rfind("```", 0) != 0) {
        complain(k, "'" + ref + "' is not followed by a code block");
        continue;
      }
      std::size_t close = k + 2;
      while (close < lines.size() && lines[close].rfind("```", 0) != 0) ++close;
      if (close == lines.size()) {
        complain(k, "the code block after '" + ref + "' is not closed");
        continue;
      }
      std::string why;
      auto want = excerpt(root / file, name, why);
      if (!want) {
        complain(k, why);
        continue;
      }
      ++checked;
      std::vector<std::string> const have(lines.begin() + std::ptrdiff_t(k + 2), lines.begin() + std::ptrdiff_t(close));
      if (have == *want) continue;
      if (update) {
        lines.erase(lines.begin() + std::ptrdiff_t(k + 2), lines.begin() + std::ptrdiff_t(close));
        lines.insert(lines.begin() + std::ptrdiff_t(k + 2), want->begin(), want->end());
        changed = true;
        continue;
      }
      std::size_t d = 0;
      while (d < have.size() && d < want->size() && have[d] == (*want)[d]) ++d;
      complain(k + 2 + d, "differs from " + ref + " (line " + std::to_string(d + 1) + " of the excerpt: '" +
                              (d < want->size() ? (*want)[d] : std::string("<end>")) + "'); run with --update");
    }
    if (changed) {
      std::ofstream out(doc);
      for (auto const& l : lines) out << l << '\n';
      std::printf("updated %s\n", doc.string().c_str());
    }
  }
  std::printf("%d snippets checked in %zu files, %d problems\n", checked, docs.size(), problems);
  return problems == 0 ? 0 : 1;
}
