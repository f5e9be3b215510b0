#include "gateway/object_meta.h"

#include <nlohmann/json.hpp>

namespace tierfs::gateway {
namespace {

// The reader of what ToJson writes (nlohmann's dump: no white space, keys in order), fast
// enough for listings (a million keys a listing; nlohmann's DOM parse was a quarter of the
// gateway's CPU per listed key). Anything else it does not expect (white space, \u
// escapes, other types, unknown fields) makes it give up, and FromJson parses with
// nlohmann instead: the fast path never decides differently from the slow one.
class FastReader {
 public:
  // keep_all false: user metadata, checksums, headers and content type are checked but not
  // kept (a listing prints none of them).
  FastReader(std::string_view s, bool keep_all) : s_(s), keep_all_(keep_all) {}

  bool Read(ObjectMeta* m) {
    if (!Eat('{')) return false;
    if (Eat('}')) return i_ == s_.size();
    for (;;) {
      std::string key;
      if (!String(&key) || !Eat(':')) return false;
      bool ok;
      if (key == "etag") {
        ok = String(&m->etag);
      } else if (key == "seq") {
        ok = Number(&m->seq);
      } else if (key == "ct") {
        ok = String(keep_all_ ? &m->content_type : &scratch_);
      } else if (key == "meta") {
        ok = Map(keep_all_ ? &m->user : nullptr);
      } else if (key == "cks") {
        ok = Map(keep_all_ ? &m->checksums : nullptr);
      } else if (key == "hdr") {
        ok = Map(keep_all_ ? &m->headers : nullptr);
      } else if (key == "parts") {
        uint64_t n = 0;
        ok = Number(&n) && n <= UINT32_MAX;
        m->parts = static_cast<uint32_t>(n);
      } else if (key == "dir") {
        ok = String(&m->dir);
      } else {
        return false;
      }
      if (!ok) return false;
      if (Eat('}')) return i_ == s_.size();
      if (!Eat(',')) return false;
    }
  }

 private:
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  bool String(std::string* out) {
    if (!Eat('"')) return false;
    out->clear();
    while (i_ < s_.size()) {
      // The plain run up to the next quote, backslash or byte it does not read, in one go.
      size_t j = i_;
      while (j < s_.size()) {
        const auto u = static_cast<unsigned char>(s_[j]);
        if (u == '"' || u == '\\' || u < 0x20 || u >= 0x80) break;
        ++j;
      }
      out->append(s_.data() + i_, j - i_);
      i_ = j;
      if (i_ == s_.size()) return false;
      char c = s_[i_++];
      if (c == '"') return true;
      // Control characters are invalid JSON; bytes of 0x80 and up are left to nlohmann,
      // which checks that they are UTF-8.
      if (c != '\\') return false;
      if (i_ == s_.size()) return false;
      switch (s_[i_++]) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        default: return false;  // \uXXXX: left to nlohmann
      }
    }
    return false;
  }

  bool Number(uint64_t* out) {
    size_t start = i_;
    uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (i_ - start == 19) return false;  // might overflow: left to nlohmann
      v = v * 10 + static_cast<uint64_t>(s_[i_++] - '0');
    }
    if (i_ == start || (s_[start] == '0' && i_ - start > 1)) return false;
    *out = v;
    return true;
  }

  // out null: checked, not kept.
  bool Map(std::map<std::string, std::string>* out) {
    if (out) out->clear();
    if (!Eat('{')) return false;
    if (Eat('}')) return true;
    for (;;) {
      std::string k, v;
      if (!String(&k) || !Eat(':') || !String(&v)) return false;
      if (out) (*out)[std::move(k)] = std::move(v);
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
    }
  }

  std::string_view s_;
  bool keep_all_;
  std::string scratch_;
  size_t i_ = 0;
};

}  // namespace

std::string ObjectMeta::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (!etag.empty()) {
    j["etag"] = etag;
    j["seq"] = seq;
  }
  if (!content_type.empty()) j["ct"] = content_type;
  if (!user.empty()) j["meta"] = user;
  if (!checksums.empty()) j["cks"] = checksums;
  if (!headers.empty()) j["hdr"] = headers;
  if (parts) j["parts"] = parts;
  if (!dir.empty()) j["dir"] = dir;
  return j.dump();
}

std::optional<ObjectMeta> ObjectMeta::FromJson(const std::string& json, bool listed) {
  {
    ObjectMeta m;
    if (FastReader(json, !listed).Read(&m)) return m;
  }
  return FromJsonDom(json);
}

std::optional<ObjectMeta> ObjectMeta::FromJsonDom(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  ObjectMeta m;
  try {
    m.etag = j.value("etag", "");
    m.seq = j.value("seq", uint64_t{0});
    m.content_type = j.value("ct", "");
    if (j.contains("meta")) m.user = j["meta"].get<std::map<std::string, std::string>>();
    if (j.contains("cks")) m.checksums = j["cks"].get<std::map<std::string, std::string>>();
    if (j.contains("hdr")) m.headers = j["hdr"].get<std::map<std::string, std::string>>();
    m.parts = j.value("parts", 0u);
    m.dir = j.value("dir", "");
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return m;
}

}  // namespace tierfs::gateway
