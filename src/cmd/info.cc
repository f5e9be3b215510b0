// tierfs info PATH [--json]: inode, length and the chunk -> slice -> object layout of a file
// in a mounted volume. The mount answers through the read-only "tierfs.info" xattr, in
// pages ("tierfs.info@N") for files of many slices.
#include <sys/stat.h>
#include <sys/xattr.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "chunk/block_key.h"
#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"

namespace tierfs::cmd {
namespace {

// The value of xattr `name` of path, of any size; an error carries the errno.
Result<std::string> GetXattr(const std::string& path, const std::string& name) {
  std::string buf(1 << 16, '\0');
  ssize_t n = getxattr(path.c_str(), name.c_str(), buf.data(), buf.size());
  if (n < 0 && errno == ERANGE) {
    n = getxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (n > 0) {
      buf.resize(static_cast<size_t>(n));
      n = getxattr(path.c_str(), name.c_str(), buf.data(), buf.size());
    }
  }
  if (n < 0) {
    int err = errno;
    return Status::Err(err, path + " is not in a TierFS mount (" + strerror(err) + ")");
  }
  buf.resize(static_cast<size_t>(n));
  return buf;
}

Result<nlohmann::json> ParseLayout(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("chunks")) {
    return Status::Err(EIO, "the mount returned malformed layout data");
  }
  return j;
}

// The file's layout. The mount answers it in pages ("tierfs.info@N": from the file's Nth
// slice on; an xattr value is at most 64 KiB, a file may have any number of slices), which
// are merged here into the document a single "tierfs.info" gives. A file that changes
// between pages is read again; a mount older than paging answers the whole "tierfs.info".
Result<nlohmann::json> ReadLayout(const std::string& path) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    nlohmann::json doc;
    nlohmann::json stamp;
    uint64_t from = 0;
    for (;;) {
      auto text = GetXattr(path, "tierfs.info@" + std::to_string(from));
      if (!text.ok() && from == 0 && text.status().code() == ENODATA) {
        ASSIGN_OR_RETURN(std::string whole, GetXattr(path, "tierfs.info"));
        return ParseLayout(whole);
      }
      if (!text.ok()) return text.status();
      ASSIGN_OR_RETURN(nlohmann::json page, ParseLayout(*text));
      nlohmann::json info = page.value("page", nlohmann::json::object());
      page.erase("page");
      nlohmann::json now = {info.value("ctime_ns", int64_t{0}), page.value("length", uint64_t{0})};
      if (from == 0) {
        doc = std::move(page);
        stamp = now;
      } else if (now != stamp) {
        break;  // changed since the first page: start again
      } else {
        for (auto& c : page["chunks"]) {
          auto& chunks = doc["chunks"];
          if (!chunks.empty() && chunks.back()["index"] == c["index"]) {
            for (auto& s : c["slices"]) chunks.back()["slices"].push_back(std::move(s));
          } else {
            chunks.push_back(std::move(c));
          }
        }
      }
      if (!info.contains("next")) return doc;
      uint64_t next = info["next"];
      if (next <= from) return Status::Err(EIO, "the mount returned malformed layout pages");
      from = next;
    }
  }
  return Status::Err(EAGAIN, "the layout of " + path + " kept changing while it was read; try again");
}

int Run(const std::string& path, bool json) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return Fail("info", Status::Err(errno, "cannot stat " + path + ": " + strerror(errno)));
  }
  auto layout = ReadLayout(path);
  if (!layout.ok()) return Fail("info", layout.status());
  nlohmann::json j = std::move(layout).value();
  std::string volume = j.value("volume", "");
  uint32_t bs = j.value("block_size", 4u << 20);
  for (auto& c : j["chunks"]) {
    for (auto& s : c["slices"]) {
      uint64_t id = s["id"];
      uint32_t size = s["size"], off = s["off"], len = s["len"];
      nlohmann::json objects = nlohmann::json::array();
      if (s.contains("pack")) {  // a packed small file: a range of a shared object
        uint32_t poff = s["pack"]["off"];
        objects.push_back(PackKey(volume, s["pack"]["id"], s["pack"]["len"]) + " bytes " + std::to_string(poff + off) +
                          "-" + std::to_string(poff + off + len - 1));
        s["objects"] = objects;
        continue;
      }
      for (const auto& span : BlockSpans(size, bs, off, len)) {
        objects.push_back(BlockKey(volume, id, span.index, BlockLength(size, bs, span.index)));
      }
      s["objects"] = objects;
    }
  }
  // The cached share (absent for files of a mount that does not answer it).
  std::string cbuf(1 << 12, '\0');
  ssize_t cn = S_ISREG(st.st_mode) ? getxattr(path.c_str(), "tierfs.cache", cbuf.data(), cbuf.size()) : -1;
  if (cn > 0) {
    auto c = nlohmann::json::parse(cbuf.substr(0, static_cast<size_t>(cn)), nullptr, false);
    if (!c.is_discarded()) j["cache"] = c;
  }
  if (json) {
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  std::cout << path << "\n  inode:  " << j["inode"] << "\n  length: " << j["length"].get<uint64_t>() << " ("
            << FormatSize(j["length"].get<uint64_t>()) << ")\n  chunks: " << j["chunks"].size() << "\n";
  if (j.contains("cache")) {
    const auto& c = j["cache"];
    uint64_t bytes = c.value("bytes", 0ull), cached = c.value("cached_bytes", 0ull);
    std::cout << "  cached: " << c.value("cached_blocks", 0ull) << " of " << c.value("blocks", 0ull) << " blocks, "
              << FormatSize(cached) << " of " << FormatSize(bytes) << " ("
              << (bytes ? 100.0 * static_cast<double>(cached) / static_cast<double>(bytes) : 100.0) << "%; "
              << c.value("disk_blocks", 0ull) << " blocks on disk)\n";
  }
  for (auto& c : j["chunks"]) {
    std::cout << "  chunk " << c["index"] << "\n";
    for (auto& s : c["slices"]) {
      std::cout << "    pos " << s["pos"] << " len " << s["len"] << ": slice " << s["id"] << " (size " << s["size"]
                << ") from offset " << s["off"] << "\n";
      for (auto& o : s["objects"]) std::cout << "      " << o.get<std::string>() << "\n";
    }
  }
  return 0;
}

}  // namespace

void RegisterInfo(CLI::App& app, int* exit_code) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("info", "Show a file's inode, length and chunk/slice/object layout");
  sub->add_option("PATH", *path, "A file in a mounted TierFS volume")->required();
  sub->add_flag("--json", *json, "Print JSON");
  sub->callback([path, json, exit_code] { *exit_code = Run(*path, *json); });
}

}  // namespace tierfs::cmd
