#include "sync/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tierfs::sync {
namespace {

constexpr uint64_t kRewriteEvery = 50000;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '%' || c == '\t' || c == '\n' || c == '\r') {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> f;
  size_t start = 0;
  for (;;) {
    size_t tab = line.find('\t', start);
    f.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return f;
    start = tab + 1;
  }
}

std::string CountsText(const Counts& c) {
  std::ostringstream o;
  o << c.found << ' ' << c.copied << ' ' << c.skipped << ' ' << c.deleted << ' ' << c.failed << ' ' << c.bytes << ' '
    << c.checked;
  return o.str();
}

bool ParseCounts(const std::string& s, Counts* c) {
  std::istringstream in(s);
  return static_cast<bool>(in >> c->found >> c->copied >> c->skipped >> c->deleted >> c->failed >> c->bytes >>
                           c->checked);
}

}  // namespace

Result<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& path, const std::string& identity) {
  std::unique_ptr<Checkpoint> cp(new Checkpoint(path, identity));
  RETURN_IF_ERROR(cp->Load());
  RETURN_IF_ERROR(cp->Rewrite());
  return cp;
}

Checkpoint::~Checkpoint() {
  if (fd_ >= 0) close(fd_);
}

Status Checkpoint::Load() {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return Status::OK();
    return Status::Err(errno, "cannot read checkpoint " + path_ + ": " + std::strerror(errno));
  }
  std::string line;
  auto bad = [&](const std::string& why) {
    return Status::Err(EINVAL, "checkpoint " + path_ + " is damaged (" + why + "); remove it to start afresh");
  };
  if (!std::getline(in, line)) return Status::OK();  // empty: never written
  auto head = Fields(line);
  if (head.size() != 2 || head[0] != "tierfs-sync-checkpoint 1") return bad("no header");
  if (Unescape(head[1]) != identity_) {
    return Status::Err(EINVAL, "checkpoint " + path_ + " belongs to another run (" + Unescape(head[1]) +
                                   "); use another file or remove it");
  }
  state_.resumed = true;
  std::map<std::string, char> begun;  // key -> op
  while (std::getline(in, line)) {
    auto f = Fields(line);
    if (f.empty() || f[0].empty()) continue;
    if (f[0] == "W" && f.size() == 3) {
      Counts c;
      if (!ParseCounts(f[2], &c)) return bad("a watermark without counts");
      state_.watermark = Unescape(f[1]);
      state_.counts = c;
    } else if (f[0] == "M" && f.size() == 3) {
      DirAttr d;
      d.key = Unescape(f[1]);
      std::istringstream a(f[2]);
      if (!(a >> d.mtime_ns >> d.mode >> d.uid >> d.gid)) return bad("a directory line without attributes");
      state_.dirs.push_back(d);
    } else if (f[0] == "R" && f.size() == 2) {
      state_.rmdirs.push_back(Unescape(f[1]));
    } else if (f[0] == "H" && f.size() == 4) {
      state_.links[f[1]] = {std::stoull(f[2]), Unescape(f[3])};
    } else if (f[0] == "B" && f.size() == 3 && f[1].size() == 1) {
      begun[Unescape(f[2])] = f[1][0];
    } else if (f[0] == "E" && f.size() == 4 && f[1].size() == 1) {
      std::string key = Unescape(f[3]);
      std::istringstream o(f[2]);
      char outcome = 0;
      uint64_t bytes = 0;
      if (!(o >> outcome >> bytes)) return bad("an end line without an outcome");
      begun.erase(key);
      state_.done[key] = outcome;
      state_.done_bytes[key] = bytes;
    } else if (!in.eof()) {
      return bad("unknown line '" + line.substr(0, 40) + "'");
    }  // a torn last line (killed while appending) is left out
  }
  // Keys at or before the watermark were settled by it.
  for (auto it = state_.done.begin(); it != state_.done.end();) {
    if (it->first <= state_.watermark && !state_.watermark.empty()) {
      state_.done_bytes.erase(it->first);
      it = state_.done.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, op] : begun) {
    if (!state_.watermark.empty() && key <= state_.watermark) continue;
    (op == 'd' ? state_.pending_delete : state_.pending_copy).insert(key);
  }
  watermark_ = state_.watermark;
  counts_ = state_.counts;
  dirs_ = state_.dirs;
  rmdirs_ = state_.rmdirs;
  for (const auto& l : state_.links) links_.emplace_back(l.first, l.second);
  for (const auto& [key, outcome] : state_.done) {
    open_[key] = "E\t" + std::string(1, outcome == 'd' ? 'd' : 'c') + "\t" + std::string(1, outcome) + " " +
                 std::to_string(state_.done_bytes[key]) + "\t" + Escape(key) + "\n";
  }
  for (const auto& key : state_.pending_copy) open_[key] = "B\tc\t" + Escape(key) + "\n";
  for (const auto& key : state_.pending_delete) open_[key] = "B\td\t" + Escape(key) + "\n";
  return Status::OK();
}

Status Checkpoint::Rewrite() {
  std::string tmp = path_ + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Err(errno, "cannot write checkpoint " + tmp + ": " + std::strerror(errno));
  std::string all = "tierfs-sync-checkpoint 1\t" + Escape(identity_) + "\n";
  all += "W\t" + Escape(watermark_) + "\t" + CountsText(counts_) + "\n";
  for (const auto& d : dirs_) {
    all += "M\t" + Escape(d.key) + "\t" + std::to_string(d.mtime_ns) + " " + std::to_string(d.mode) + " " +
           std::to_string(d.uid) + " " + std::to_string(d.gid) + "\n";
  }
  for (const auto& r : rmdirs_) all += "R\t" + Escape(r) + "\n";
  for (const auto& [id, l] : links_) all += "H\t" + id + "\t" + std::to_string(l.first) + "\t" + Escape(l.second) + "\n";
  for (const auto& [key, lines] : open_) all += lines;
  for (size_t done = 0; done < all.size();) {
    ssize_t w = write(fd, all.data() + done, all.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      Status st = Status::Err(errno, "cannot write checkpoint " + tmp + ": " + std::strerror(errno));
      close(fd);
      return st;
    }
    done += static_cast<size_t>(w);
  }
  if (fsync(fd) != 0 || rename(tmp.c_str(), path_.c_str()) != 0) {
    Status st = Status::Err(errno, "cannot replace checkpoint " + path_ + ": " + std::strerror(errno));
    close(fd);
    return st;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = fd;  // the renamed file, appended to from here on
  if (lseek(fd_, 0, SEEK_END) < 0) return Status::Err(errno, "cannot append to checkpoint " + path_);
  lines_since_rewrite_ = 0;
  return Status::OK();
}

void Checkpoint::Append(const std::string& line) {
  if (!error_.ok()) return;
  for (size_t done = 0; done < line.size();) {
    ssize_t w = write(fd_, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      error_ = Status::Err(errno, "cannot write checkpoint " + path_ + ": " + std::strerror(errno));
      return;
    }
    done += static_cast<size_t>(w);
  }
  if (++lines_since_rewrite_ >= kRewriteEvery) {
    Status st = Rewrite();
    if (!st.ok()) error_ = st;
  }
}

void Checkpoint::Begin(char op, const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  std::string line = "B\t" + std::string(1, op) + "\t" + Escape(key) + "\n";
  open_[key] = line;
  Append(line);
}

void Checkpoint::End(char op, char outcome, uint64_t bytes, const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  std::string line = "E\t" + std::string(1, op) + "\t" + std::string(1, outcome) + " " + std::to_string(bytes) +
                     "\t" + Escape(key) + "\n";
  open_[key] = line;
  Append(line);
}

void Checkpoint::Dir(const DirAttr& d) {
  std::lock_guard<std::mutex> l(mu_);
  dirs_.push_back(d);
  Append("M\t" + Escape(d.key) + "\t" + std::to_string(d.mtime_ns) + " " + std::to_string(d.mode) + " " +
         std::to_string(d.uid) + " " + std::to_string(d.gid) + "\n");
}

void Checkpoint::Rmdir(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  rmdirs_.push_back(key);
  Append("R\t" + Escape(key) + "\n");
}

void Checkpoint::Link(const std::string& id, uint64_t dst_ino, const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  links_.emplace_back(id, std::make_pair(dst_ino, key));
  Append("H\t" + id + "\t" + std::to_string(dst_ino) + "\t" + Escape(key) + "\n");
}

void Checkpoint::Advance(const std::string& key, const Counts& counts) {
  std::lock_guard<std::mutex> l(mu_);
  watermark_ = key;
  counts_ = counts;
  open_.erase(open_.begin(), open_.upper_bound(key));
  Append("W\t" + Escape(key) + "\t" + CountsText(counts) + "\n");
}

Status Checkpoint::status() {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

Status Checkpoint::Finish() {
  std::lock_guard<std::mutex> l(mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return Status::Err(errno, "cannot remove checkpoint " + path_ + ": " + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace tierfs::sync
