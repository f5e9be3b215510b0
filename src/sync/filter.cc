#include "sync/filter.h"

namespace tierfs::sync {

bool GlobMatch(const char* p, const char* t) {
  for (; *p; ++p) {
    switch (*p) {
      case '?':
        if (*t == '\0' || *t == '/') return false;
        ++t;
        break;
      case '*': {
        bool any = p[1] == '*';
        while (*p == '*') ++p;
        if (*p == '\0') return any || std::string(t).find('/') == std::string::npos;
        for (;; ++t) {
          if (GlobMatch(p, t)) return true;
          if (*t == '\0' || (!any && *t == '/')) return false;
        }
      }
      case '[': {
        if (*t == '\0' || *t == '/') return false;
        const char* q = p + 1;
        bool negate = *q == '!' || *q == '^';
        if (negate) ++q;
        bool found = false;
        bool first = true;
        for (; *q && (first || *q != ']'); ++q, first = false) {
          char lo = *q;
          if (lo == '\\' && q[1]) lo = *++q;
          if (q[1] == '-' && q[2] && q[2] != ']') {
            char hi = q[2];
            q += 2;
            if (static_cast<unsigned char>(*t) >= static_cast<unsigned char>(lo) &&
                static_cast<unsigned char>(*t) <= static_cast<unsigned char>(hi))
              found = true;
          } else if (*t == lo) {
            found = true;
          }
        }
        if (*q != ']') {  // no closing bracket: a literal '['
          if (*t != '[') return false;
          ++t;
          break;
        }
        if (found == negate) return false;
        p = q;
        ++t;
        break;
      }
      case '\\':
        if (p[1]) ++p;
        [[fallthrough]];
      default:
        if (*t != *p) return false;
        ++t;
    }
  }
  return *t == '\0';
}

void Filter::Add(bool include, const std::string& pattern_in) {
  std::string pat = pattern_in;
  Rule r{include, "", false, false, false};
  if (!pat.empty() && pat.back() == '/') {
    r.dir_only = true;
    pat.pop_back();
  }
  if (!pat.empty() && pat.front() == '/') {
    r.anchored = true;
    pat.erase(0, 1);
  }
  // "DIR/***": DIR itself (a directory) and everything below it.
  if (pat.size() >= 4 && pat.compare(pat.size() - 4, 4, "/***") == 0) {
    std::string dir = pat.substr(0, pat.size() - 4);
    Rule self = r;
    self.pattern = dir;
    self.dir_only = true;
    self.whole_path = self.anchored || dir.find('/') != std::string::npos || dir.find("**") != std::string::npos;
    rules_.push_back(self);
    pat = dir + "/**";
  }
  r.pattern = pat;
  r.whole_path = r.anchored || pat.find('/') != std::string::npos || pat.find("**") != std::string::npos;
  rules_.push_back(r);
}

bool Filter::Matches(const Rule& r, const std::string& path, bool is_dir) const {
  if (r.dir_only && !is_dir) return false;
  if (!r.whole_path) {
    size_t slash = path.rfind('/');
    return GlobMatch(r.pattern.c_str(), path.c_str() + (slash == std::string::npos ? 0 : slash + 1));
  }
  if (GlobMatch(r.pattern.c_str(), path.c_str())) return true;
  if (r.anchored) return false;
  for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1)) {
    if (GlobMatch(r.pattern.c_str(), path.c_str() + i + 1)) return true;
  }
  return false;
}

bool Filter::Included(const std::string& path, bool is_dir) const {
  for (const Rule& r : rules_) {
    if (Matches(r, path, is_dir)) return r.include;
  }
  return true;
}

bool Filter::IncludedWithParents(const std::string& key) const {
  if (rules_.empty()) return true;
  bool is_dir = !key.empty() && key.back() == '/';
  std::string path = is_dir ? key.substr(0, key.size() - 1) : key;
  for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1)) {
    if (!Included(path.substr(0, i), true)) return false;
  }
  return Included(path, is_dir);
}

std::string Filter::Describe() const {
  std::string out;
  for (const Rule& r : rules_) {
    out += r.include ? "+ " : "- ";
    out += (r.anchored ? "/" : "") + r.pattern + (r.dir_only ? "/" : "") + "\n";
  }
  return out;
}

}  // namespace tierfs::sync
