#include "object/s3_xml.h"

#include <tinyxml2.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace tierfs {
namespace {

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

Status Malformed(const std::string& what) { return Status::Err(EIO, "malformed S3 response: " + what); }

// Parses body and returns its root element when it is named root_name.
Result<const XMLElement*> Root(XMLDocument* doc, std::string_view body, const char* root_name) {
  if (doc->Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) {
    return Malformed(std::string("expected <") + root_name + ">, got unparsable XML (" + doc->ErrorStr() + ")");
  }
  const XMLElement* root = doc->RootElement();
  if (root == nullptr || std::string_view(root->Name()) != root_name) {
    return Malformed(std::string("expected <") + root_name + ">, got <" + (root ? root->Name() : "") + ">");
  }
  return root;
}

std::string ChildText(const XMLElement* e, const char* name) {
  const XMLElement* c = e->FirstChildElement(name);
  if (c == nullptr || c->GetText() == nullptr) return "";
  return c->GetText();
}

bool ParseBool(const std::string& s) { return s == "true"; }

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace

bool ParseS3Error(std::string_view body, S3Error* out) {
  if (body.empty()) return false;
  XMLDocument doc;
  if (doc.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) return false;
  const XMLElement* root = doc.RootElement();
  if (root == nullptr || std::string_view(root->Name()) != "Error") return false;
  out->code = ChildText(root, "Code");
  out->message = ChildText(root, "Message");
  return true;
}

Status ParseListObjects(std::string_view body, ListObjectsPage* out) {
  XMLDocument doc;
  ASSIGN_OR_RETURN(const XMLElement* root, Root(&doc, body, "ListBucketResult"));
  for (const XMLElement* c = root->FirstChildElement("Contents"); c != nullptr;
       c = c->NextSiblingElement("Contents")) {
    ObjectInfo info;
    info.key = ChildText(c, "Key");
    if (info.key.empty()) return Malformed("<Contents> without <Key>");
    std::string size = ChildText(c, "Size");
    char* end = nullptr;
    info.size = std::strtoull(size.c_str(), &end, 10);
    if (size.empty() || *end != '\0') return Malformed("bad <Size> '" + size + "' of " + info.key);
    info.mtime_ns = ParseIso8601(ChildText(c, "LastModified"));
    info.etag = ChildText(c, "ETag");
    if (info.etag.size() >= 2 && info.etag.front() == '"' && info.etag.back() == '"')
      info.etag = info.etag.substr(1, info.etag.size() - 2);
    out->objects.push_back(std::move(info));
  }
  for (const XMLElement* c = root->FirstChildElement("CommonPrefixes"); c != nullptr;
       c = c->NextSiblingElement("CommonPrefixes")) {
    std::string p = ChildText(c, "Prefix");
    if (p.empty()) return Malformed("<CommonPrefixes> without <Prefix>");
    out->prefixes.push_back(std::move(p));
  }
  out->truncated = ParseBool(ChildText(root, "IsTruncated"));
  out->next_token = ChildText(root, "NextContinuationToken");
  if (out->truncated && out->next_token.empty()) return Malformed("truncated listing without a continuation token");
  return Status::OK();
}

Result<std::string> ParseUploadId(std::string_view body) {
  XMLDocument doc;
  ASSIGN_OR_RETURN(const XMLElement* root, Root(&doc, body, "InitiateMultipartUploadResult"));
  std::string id = ChildText(root, "UploadId");
  if (id.empty()) return Malformed("no <UploadId>");
  return id;
}

Status ParseListParts(std::string_view body, ListPartsPage* out) {
  XMLDocument doc;
  ASSIGN_OR_RETURN(const XMLElement* root, Root(&doc, body, "ListPartsResult"));
  for (const XMLElement* p = root->FirstChildElement("Part"); p != nullptr; p = p->NextSiblingElement("Part")) {
    int num = std::atoi(ChildText(p, "PartNumber").c_str());
    std::string etag = ChildText(p, "ETag");
    if (num < 1 || etag.empty()) return Malformed("<Part> without a part number or ETag");
    out->etags[num] = etag;
  }
  out->truncated = ParseBool(ChildText(root, "IsTruncated"));
  out->next_marker = std::atoi(ChildText(root, "NextPartNumberMarker").c_str());
  if (out->truncated && out->next_marker < 1) return Malformed("truncated part list without a marker");
  return Status::OK();
}

std::string CompleteMultipartXml(const std::map<int, std::string>& etags) {
  std::string out = "<CompleteMultipartUpload>";
  for (const auto& [num, etag] : etags) {
    out += "<Part><PartNumber>" + std::to_string(num) + "</PartNumber><ETag>" + XmlEscape(etag) + "</ETag></Part>";
  }
  out += "</CompleteMultipartUpload>";
  return out;
}

std::string CreateBucketXml(const std::string& region) {
  return "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>" +
         XmlEscape(region) + "</LocationConstraint></CreateBucketConfiguration>";
}

int64_t ParseIso8601(std::string_view text) {
  struct tm tm = {};
  int consumed = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return 0;
  }
  int64_t frac_ns = 0;
  size_t pos = static_cast<size_t>(consumed);
  if (pos < s.size() && s[pos] == '.') {
    int64_t scale = 100000000;
    for (++pos; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos) {
      frac_ns += (s[pos] - '0') * scale;
      scale /= 10;
    }
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return 0;
  return static_cast<int64_t>(t) * 1000000000LL + frac_ns;
}

}  // namespace tierfs
