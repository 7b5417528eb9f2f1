// Keeps the findings table (include/ctgrad/check/findings.hpp) in step with
// docs/04-diagnostics.md and tests/compile_fail: every finding has its docs
// entry, and every finding decided at compile time has a compile-fail test
// named after its ID (adNNN_*.cpp).
//
//   ctgrad_check_findings <source dir>
#include <cstdio>
#include <ctgrad/check/findings.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <source dir>\n", argv[0]);
    return 2;
  }
  fs::path const root = argv[1];
  std::ifstream in(root / "docs" / "04-diagnostics.md");
  std::stringstream docs;
  docs << in.rdbuf();
  std::string const text = docs.str();
  int problems = 0;
  for (auto const& row : ctg::check::finding_table) {
    char id[16], stem[8];
    std::snprintf(id, sizeof id, "CTG-AD-%03d", row.number);
    std::snprintf(stem, sizeof stem, "ad%03d_", row.number);
    if (std::string(row.message).rfind(id, 0) != 0) {
      std::printf("%s: its message does not begin with its ID\n", id);
      ++problems;
    }
    if (text.find("### " + std::string(id)) == std::string::npos) {
      std::printf("%s: no entry '### %s' in docs/04-diagnostics.md\n", id, id);
      ++problems;
    }
    if (row.when == ctg::check::decided_at::compile) {
      bool found = false;
      for (auto const& e : fs::directory_iterator(root / "tests" / "compile_fail"))
        found = found || e.path().filename().string().rfind(stem, 0) == 0;
      if (!found) {
        std::printf("%s: no compile-fail test tests/compile_fail/%s*.cpp\n", id, stem);
        ++problems;
      }
    }
  }
  if (problems == 0) std::printf("every finding has its docs entry and its compile-fail test\n");
  return problems == 0 ? 0 : 1;
}
