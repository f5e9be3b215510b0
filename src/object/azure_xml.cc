#include "object/azure_xml.h"

#include <tinyxml2.h>

#include <cerrno>
#include <cstdlib>

#include "object/http_client.h"

namespace tierfs {
namespace {

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

Status Malformed(const std::string& what) { return Status::Err(EIO, "malformed Azure response: " + what); }

std::string ChildText(const XMLElement* e, const char* name) {
  const XMLElement* c = e->FirstChildElement(name);
  if (c == nullptr || c->GetText() == nullptr) return "";
  return c->GetText();
}

}  // namespace

bool ParseAzureError(std::string_view body, AzureError* out) {
  if (body.empty()) return false;
  XMLDocument doc;
  if (doc.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) return false;
  const XMLElement* root = doc.RootElement();
  if (root == nullptr || std::string_view(root->Name()) != "Error") return false;
  out->code = ChildText(root, "Code");
  out->message = ChildText(root, "Message");
  // Azure appends "\nRequestId:...\nTime:..." to every message; the first line says it.
  size_t nl = out->message.find('\n');
  if (nl != std::string::npos) out->message.resize(nl);
  return true;
}

Status ParseBlobList(std::string_view body, BlobListPage* out) {
  XMLDocument doc;
  if (doc.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) {
    return Malformed(std::string("expected <EnumerationResults>, got unparsable XML (") + doc.ErrorStr() + ")");
  }
  const XMLElement* root = doc.RootElement();
  if (root == nullptr || std::string_view(root->Name()) != "EnumerationResults") {
    return Malformed(std::string("expected <EnumerationResults>, got <") + (root ? root->Name() : "") + ">");
  }
  if (const XMLElement* blobs = root->FirstChildElement("Blobs")) {
    for (const XMLElement* b = blobs->FirstChildElement("Blob"); b != nullptr; b = b->NextSiblingElement("Blob")) {
      ObjectInfo info;
      const XMLElement* name = b->FirstChildElement("Name");
      // Names that are not valid XML text come back base64 with Encoded="true".
      if (name != nullptr && name->BoolAttribute("Encoded", false)) {
        return Malformed("blob name sent encoded (it holds characters XML cannot carry)");
      }
      info.key = ChildText(b, "Name");
      if (info.key.empty()) return Malformed("<Blob> without <Name>");
      const XMLElement* props = b->FirstChildElement("Properties");
      if (props == nullptr) return Malformed("<Blob> " + info.key + " without <Properties>");
      std::string size = ChildText(props, "Content-Length");
      char* end = nullptr;
      info.size = std::strtoull(size.c_str(), &end, 10);
      if (size.empty() || *end != '\0') return Malformed("bad <Content-Length> '" + size + "' of " + info.key);
      info.mtime_ns = ParseHttpDate(ChildText(props, "Last-Modified"));
      out->objects.push_back(std::move(info));
    }
    for (const XMLElement* b = blobs->FirstChildElement("BlobPrefix"); b != nullptr;
         b = b->NextSiblingElement("BlobPrefix")) {
      const XMLElement* name = b->FirstChildElement("Name");
      if (name != nullptr && name->BoolAttribute("Encoded", false)) {
        return Malformed("blob prefix sent encoded (it holds characters XML cannot carry)");
      }
      std::string p = ChildText(b, "Name");
      if (p.empty()) return Malformed("<BlobPrefix> without <Name>");
      out->prefixes.push_back(std::move(p));
    }
  }
  out->next_marker = ChildText(root, "NextMarker");
  return Status::OK();
}

std::string BlockListXml(const std::vector<std::string>& block_ids) {
  // Block ids are base64: nothing in them needs escaping.
  std::string out = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
  for (const std::string& id : block_ids) out += "<Latest>" + id + "</Latest>";
  out += "</BlockList>";
  return out;
}

}  // namespace tierfs
