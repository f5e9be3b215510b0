#include "cmd/util.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "meta/kv_engine.h"
#include "meta/meta.h"

namespace tierfs::cmd {

int Fail(const std::string& what, const Status& st) {
  std::cerr << "tierfs: " << what << ": " << st.message() << std::endl;
  return 1;
}

Result<std::unique_ptr<Meta>> OpenVolume(const std::string& meta_url, bool read_only, int64_t dir_attr_cache_ns) {
  ASSIGN_OR_RETURN(auto engine, OpenKvEngine(meta_url));
  MetaOptions opts;
  opts.read_only = read_only;
  opts.dir_attr_cache_ns = dir_attr_cache_ns;
  return Meta::Open(std::move(engine), opts);
}

std::string AbsPath(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return p.lexically_normal().string();
}

// Mountinfo escapes space, tab, newline and backslash as octal.
static std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() + 1 && i + 3 <= s.size()) {
      out.push_back(static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool IsMountPoint(const std::string& abs_path) {
  std::string target = abs_path;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, devno, root, mnt;
    ls >> id >> parent >> devno >> root >> mnt;
    if (Unescape(mnt) == target) return true;
  }
  return false;
}

}  // namespace tierfs::cmd
