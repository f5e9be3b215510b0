#include "object/azure_sign.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <vector>

#include "common/base64.h"

namespace tierfs {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Header values are signed trimmed, with line breaks unfolded to one space.
std::string Trimmed(std::string_view v) {
  size_t b = 0, e = v.size();
  while (b < e && std::isspace(static_cast<unsigned char>(v[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(v[e - 1]))) --e;
  std::string out;
  for (char c : v.substr(b, e - b)) out.push_back(c == '\r' || c == '\n' ? ' ' : c);
  return out;
}

}  // namespace

std::string SharedKeyStringToSign(const std::string& account, const SharedKeyRequest& req) {
  std::map<std::string, std::string> std_headers;
  std::map<std::string, std::string> ms_headers;
  for (const auto& [name, value] : req.headers) {
    std::string n = Lower(name);
    auto& target = n.starts_with("x-ms-") ? ms_headers : std_headers;
    std::string& v = target[n];
    if (!v.empty()) v.push_back(',');
    v += Trimmed(value);
  }
  auto h = [&](const char* name) {
    auto it = std_headers.find(name);
    return it == std_headers.end() ? std::string() : it->second;
  };
  std::string out = req.method + "\n";
  out += h("content-encoding") + "\n";
  out += h("content-language") + "\n";
  out += (req.content_length == 0 ? std::string() : std::to_string(req.content_length)) + "\n";
  out += h("content-md5") + "\n";
  out += h("content-type") + "\n";
  out += h("date") + "\n";
  out += h("if-modified-since") + "\n";
  out += h("if-match") + "\n";
  out += h("if-none-match") + "\n";
  out += h("if-unmodified-since") + "\n";
  out += h("range") + "\n";
  for (const auto& [name, value] : ms_headers) out += name + ":" + value + "\n";
  out += "/" + account + req.path;
  std::map<std::string, std::vector<std::string>> params;
  for (const auto& [name, value] : req.query) params[Lower(name)].push_back(value);
  for (auto& [name, values] : params) {
    std::sort(values.begin(), values.end());
    out += "\n" + name + ":";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + values[i];
  }
  return out;
}

std::string SharedKeyAuthorization(const std::string& account, const std::string& key, const SharedKeyRequest& req) {
  return "SharedKey " + account + ":" + Base64Encode(HmacSha256(key, SharedKeyStringToSign(account, req)));
}

std::string HttpDate(time_t t) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  // Formatted by hand: strftime's %a and %b depend on the process locale.
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday], tm.tm_mday,
                kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

std::string AzureBlockId(const std::string& upload_id, int part_num) {
  char num[16];
  std::snprintf(num, sizeof(num), "%06d", part_num);
  return Base64Encode(upload_id + "-" + num);
}

}  // namespace tierfs
