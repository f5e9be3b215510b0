#include "gateway/xml_out.h"

#include <tinyxml2.h>

#include <cstring>
#include <ctime>

namespace tierfs::gateway {

void AppendXmlEscaped(std::string* out, std::string_view s) {
  size_t plain = 0;  // s[plain, i) is appended as it is, in one go
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const char* esc = nullptr;
    switch (c) {
      case '&': esc = "&amp;"; break;
      case '<': esc = "&lt;"; break;
      case '>': esc = "&gt;"; break;
      case '"': esc = "&quot;"; break;
      case '\'': esc = "&apos;"; break;
      default:
        // Control characters cannot appear in XML 1.0 text, even escaped: S3 itself asks
        // clients to use encoding-type=url for such keys.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') continue;
    }
    out->append(s.data() + plain, i - plain);
    plain = i + 1;
    if (esc) {
      *out += esc;
    } else {
      char buf[8];
      snprintf(buf, sizeof buf, "&#x%X;", static_cast<unsigned char>(c));
      *out += buf;
    }
  }
  out->append(s.data() + plain, s.size() - plain);
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  AppendXmlEscaped(&out, s);
  return out;
}

std::string Iso8601(int64_t ns) {
  // Listings format a time per key, mostly of the same few seconds: the date and time of
  // the last second formatted on this thread are kept.
  thread_local time_t last_t = -1;
  thread_local char last[40];
  int64_t secs = ns / 1000000000, ms = (ns / 1000000) % 1000;
  if (ms < 0) {  // before 1970: the second below, and what is left of it
    secs -= 1;
    ms += 1000;
  }
  const time_t t = static_cast<time_t>(secs);
  if (t != last_t) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(last, sizeof last, "%Y-%m-%dT%H:%M:%S", &tm);
    last_t = t;
  }
  std::string out(last);
  const char frac[] = {'.', static_cast<char>('0' + ms / 100), static_cast<char>('0' + ms / 10 % 10),
                       static_cast<char>('0' + ms % 10), 'Z'};
  out.append(frac, sizeof frac);
  return out;
}

std::string HttpDate(int64_t ns) {
  time_t t = static_cast<time_t>(ns / 1000000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

int64_t ParseHttpDate(const std::string& s) {
  struct tm tm = {};
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!end) {
    tm = {};
    end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  }
  if (!end) return -1;
  return static_cast<int64_t>(timegm(&tm)) * 1000000000;
}

Xml::Xml(bool declaration) {
  if (declaration) s_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
}
Xml& Xml::Open(std::string_view tag, std::string_view attrs) {
  s_ += "<";
  s_ += tag;
  if (!attrs.empty()) {
    s_ += " ";
    s_ += attrs;
  }
  s_ += ">";
  return *this;
}
Xml& Xml::Close(std::string_view tag) {
  s_ += "</";
  s_ += tag;
  s_ += ">";
  return *this;
}
Xml& Xml::Leaf(std::string_view tag, std::string_view text) {
  Open(tag);
  AppendXmlEscaped(&s_, text);
  return Close(tag);
}

std::string ErrorXml(const S3Error& e, const std::string& resource, const std::string& request_id) {
  Xml x;
  x.Open("Error").Leaf("Code", e.code).Leaf("Message", e.message).Leaf("Resource", resource).Leaf("RequestId", request_id);
  x.Close("Error");
  return x.str();
}

namespace {
std::string Unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  if (s.size() >= 12 && s.rfind("&quot;", 0) == 0) s = s.substr(6, s.size() - 12);
  return s;
}
const char* Text(const tinyxml2::XMLElement* e) { return e && e->GetText() ? e->GetText() : ""; }
}  // namespace

S3Result<std::vector<CompletePart>> ParseCompleteMultipart(std::string_view body) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) {
    return Err(400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.");
  }
  auto* root = doc.FirstChildElement("CompleteMultipartUpload");
  if (!root) return Err(400, "MalformedXML", "expected <CompleteMultipartUpload>");
  std::vector<CompletePart> parts;
  for (auto* p = root->FirstChildElement("Part"); p; p = p->NextSiblingElement("Part")) {
    CompletePart cp;
    const char* num = Text(p->FirstChildElement("PartNumber"));
    char* end = nullptr;
    long n = strtol(num, &end, 10);
    if (!*num || *end || n < 1 || n > 10000) return Err(400, "InvalidArgument", std::string("bad PartNumber '") + num + "'");
    cp.number = static_cast<int>(n);
    cp.etag = Unquote(Text(p->FirstChildElement("ETag")));
    for (const char* algo : {"CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"}) {
      auto* c = p->FirstChildElement((std::string("Checksum") + algo).c_str());
      if (c) cp.checksums.emplace_back(algo, Text(c));
    }
    parts.push_back(std::move(cp));
  }
  if (parts.empty()) {
    return Err(400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.");
  }
  return parts;
}

S3Result<DeleteRequest> ParseDeleteObjects(std::string_view body) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) {
    return Err(400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.");
  }
  auto* root = doc.FirstChildElement("Delete");
  if (!root) return Err(400, "MalformedXML", "expected <Delete>");
  DeleteRequest out;
  out.quiet = std::strcmp(Text(root->FirstChildElement("Quiet")), "true") == 0;
  for (auto* o = root->FirstChildElement("Object"); o; o = o->NextSiblingElement("Object")) {
    out.keys.push_back(Text(o->FirstChildElement("Key")));
  }
  if (out.keys.size() > 1000) return Err(400, "MalformedXML", "at most 1000 keys per DeleteObjects request");
  return out;
}

}  // namespace tierfs::gateway
