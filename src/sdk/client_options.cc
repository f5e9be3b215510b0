#include "sdk/client_options.h"

#include <functional>

namespace tierfs::sdk {

namespace {

Status Bad(const std::string& name, const std::string& value, const std::string& want) {
  return Status::Err(EINVAL, "option " + name + "=" + value + ": " + want);
}

Status Bool(const std::string& name, const std::string& v, bool* out) {
  if (v == "True" || v == "true" || v == "1" || v == "yes") {
    *out = true;
  } else if (v == "False" || v == "false" || v == "0" || v == "no" || v == "None") {
    *out = false;
  } else {
    return Bad(name, v, "want True or False");
  }
  return Status::OK();
}

Status Number(const std::string& name, const std::string& v, double lo, double hi, double* out) {
  size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used != v.size() || v.empty() || !(d >= lo && d <= hi)) {
    return Bad(name, v, "want a number from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  *out = d;
  return Status::OK();
}

Status Int(const std::string& name, const std::string& v, int lo, int hi, int* out) {
  double d;
  RETURN_IF_ERROR(Number(name, v, lo, hi, &d));
  if (d != static_cast<int>(d)) return Bad(name, v, "want a whole number");
  *out = static_cast<int>(d);
  return Status::OK();
}

using Setter = std::function<Status(const std::string& name, const std::string& v)>;

// Applies each given option through its setter; EINVAL names an unknown one and the known.
Status ApplyNamed(const std::map<std::string, std::string>& given, const std::map<std::string, Setter>& setters,
                  const std::string& what) {
  for (const auto& [name, value] : given) {
    auto it = setters.find(name);
    if (it == setters.end()) {
      std::string known;
      for (const auto& s : setters) known += (known.empty() ? "" : ", ") + s.first;
      return Status::Err(EINVAL, "unknown " + what + name + " (known: " + known + ")");
    }
    RETURN_IF_ERROR(it->second(name, value));
  }
  return Status::OK();
}

}  // namespace

Status ApplyClientOptions(const std::map<std::string, std::string>& given, client::VolumeOptions* o) {
  o->label = "python";
  o->metrics = "0";
  o->backup_meta = 0;
  const std::map<std::string, Setter> setters = {
      {"meta_url", [&](auto&, auto& v) { o->meta_url = v; return Status::OK(); }},
      {"label", [&](auto&, auto& v) { o->label = v; return Status::OK(); }},
      {"cache_dir", [&](auto&, auto& v) { o->cache.cache_dir = v; return Status::OK(); }},
      {"cache_size", [&](auto&, auto& v) { o->cache.cache_size = v; return Status::OK(); }},
      {"mem_cache_size", [&](auto&, auto& v) { o->cache.mem_cache_size = v; return Status::OK(); }},
      {"free_space_ratio", [&](auto& n, auto& v) { return Number(n, v, 0, 0.9, &o->cache.free_space_ratio); }},
      {"cache_writes", [&](auto& n, auto& v) { return Bool(n, v, &o->cache.cache_writes); }},
      {"io_timeout", [&](auto& n, auto& v) { return Int(n, v, 1, 86400, &o->cache.io_timeout); }},
      {"buffer_size", [&](auto&, auto& v) { o->buffer_size = v; return Status::OK(); }},
      {"writeback", [&](auto& n, auto& v) { return Bool(n, v, &o->writeback); }},
      {"upload_delay", [&](auto& n, auto& v) { return Number(n, v, 0, 86400 * 7, &o->upload_delay); }},
      {"pack_below", [&](auto&, auto& v) { o->pack_below = v; return Status::OK(); }},
      {"open_cache", [&](auto& n, auto& v) { return Number(n, v, 0, 86400, &o->open_cache); }},
      {"attr_cache", [&](auto& n, auto& v) { return Number(n, v, 0, 86400, &o->attr_cache); }},
      {"cache_group", [&](auto&, auto& v) { o->group.name = v; return Status::OK(); }},
      {"group_addr", [&](auto&, auto& v) { o->group.addr = v; return Status::OK(); }},
      {"no_sharing", [&](auto& n, auto& v) { return Bool(n, v, &o->group.no_sharing); }},
      {"subdir", [&](auto&, auto& v) { o->subdir = v; return Status::OK(); }},
      {"read_only", [&](auto& n, auto& v) { return Bool(n, v, &o->read_only); }},
      {"metrics", [&](auto&, auto& v) { o->metrics = v == "None" ? "0" : v; return Status::OK(); }},
      {"upload_threads", [&](auto& n, auto& v) { return Int(n, v, 1, 256, &o->upload_threads); }},
      {"download_threads", [&](auto& n, auto& v) { return Int(n, v, 1, 256, &o->download_threads); }},
      {"backup_meta", [&](auto& n, auto& v) { return Number(n, v, 0, 86400 * 365, &o->backup_meta); }},
      {"atime",
       [&](auto& n, auto& v) {
         if (v == "relatime") {
           o->atime = AtimeMode::kRelatime;
         } else if (v == "strictatime") {
           o->atime = AtimeMode::kStrict;
         } else if (v == "noatime") {
           o->atime = AtimeMode::kNone;
         } else {
           return Bad(n, v, "want relatime, strictatime or noatime");
         }
         return Status::OK();
       }},
  };
  RETURN_IF_ERROR(ApplyNamed(given, setters, "option "));
  if (o->meta_url.empty()) return Status::Err(EINVAL, "no META-URL given");
  return Status::OK();
}

Status ApplyFormatOptions(const std::map<std::string, std::string>& given, client::FormatOptions* o) {
  auto text = [](std::string* field) {
    return [field](const std::string&, const std::string& v) {
      *field = v;
      return Status::OK();
    };
  };
  const std::map<std::string, Setter> setters = {
      {"meta_url", text(&o->meta_url)},
      {"name", text(&o->name)},
      {"storage", text(&o->storage)},
      {"bucket", text(&o->bucket)},
      {"block_size", text(&o->block_size)},
      {"access_key", text(&o->access_key)},
      {"secret_key", text(&o->secret_key)},
      {"session_token", text(&o->session_token)},
      {"ceph_conf", text(&o->ceph_conf)},
      {"capacity", text(&o->capacity)},
      {"inodes", text(&o->inodes)},
      {"session_timeout", [&](auto& n, auto& v) { return Int(n, v, 1, 86400, &o->session_timeout); }},
      {"trash_days", [&](auto& n, auto& v) { return Int(n, v, 0, 3650, &o->trash_days); }},
      {"changelog_hours", [&](auto& n, auto& v) { return Int(n, v, 0, 87600, &o->changelog_hours); }},
      {"format_version", [&](auto& n, auto& v) { return Int(n, v, 1, kFormatVersion, &o->format_version); }},
      {"force", [&](auto& n, auto& v) { return Bool(n, v, &o->force); }},
  };
  RETURN_IF_ERROR(ApplyNamed(given, setters, "format option "));
  if (o->meta_url.empty()) return Status::Err(EINVAL, "no META-URL given");
  return Status::OK();
}

}  // namespace tierfs::sdk
