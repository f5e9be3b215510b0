#include "meta/postgres_params.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <utility>

#include "common/secret.h"

namespace tierfs::pg {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Replaces the value of every password-like query parameter with "****".
std::string RedactQuery(std::string text) {
  for (const char* key : {"password=", "sslpassword="}) {
    size_t pos = 0;
    while ((pos = text.find(key, pos)) != std::string::npos) {
      bool at_param_start = pos > 0 && (text[pos - 1] == '?' || text[pos - 1] == '&');
      pos += std::char_traits<char>::length(key);
      if (!at_param_start) continue;
      size_t end = text.find('&', pos);
      if (end == std::string::npos) end = text.size();
      if (end > pos) text.replace(pos, end - pos, "****");
    }
  }
  return text;
}

constexpr char kForm[] =
    "expected postgres://USER:PASSWORD@HOST[:PORT][,HOST2[:PORT],...]/DATABASE[?timeout=30s&...]";

}  // namespace

std::string PercentDecode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

Result<std::chrono::milliseconds> ParseTimeout(const std::string& text) {
  std::string number = text;
  double scale = 1000.0;  // seconds by default
  if (number.size() > 2 && number.compare(number.size() - 2, 2, "ms") == 0) {
    number.resize(number.size() - 2);
    scale = 1.0;
  } else if (number.size() > 1 && number.back() == 's') {
    number.pop_back();
  }
  char* end = nullptr;
  errno = 0;
  double v = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
  if (number.empty() || errno != 0 || end == nullptr || *end != '\0' || !std::isfinite(v) ||
      v <= 0 || v * scale > 1e9) {
    return Status::Err(EINVAL,
                       "bad timeout '" + text +
                           "' in the metadata URL: expected seconds such as 30, 2.5, 30s or "
                           "500ms");
  }
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(v * scale)));
}

Result<Params> ParamsFromUrl(const Url& url) {
  Params p;
  p.redacted = RedactQuery(url.Redacted());
  // The URL parser took the last ":PORT" as the port: put it back and split the hosts.
  std::string authority = url.host + (url.port != 0 ? ":" + std::to_string(url.port) : "");
  std::vector<std::pair<std::string, std::string>> hosts;  // host, port ("" if not given)
  if (!authority.empty()) {
    size_t pos = 0;
    for (;;) {
      size_t comma = authority.find(',', pos);
      std::string item = authority.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      auto bad = [&](const std::string& why) {
        return Status::Err(EINVAL, "malformed metadata URL '" + p.redacted + "': " + why + "; " + kForm);
      };
      std::string host = item, port;
      if (!item.empty() && item.front() == '[') {  // IPv6 literal
        size_t close = item.find(']');
        if (close == std::string::npos) return bad("'" + item + "' lacks its closing ']'");
        host = item.substr(1, close - 1);
        std::string rest = item.substr(close + 1);
        if (!rest.empty() && rest.front() != ':') return bad("'" + item + "' has text after ']'");
        if (!rest.empty()) port = rest.substr(1);
      } else if (size_t colon = item.rfind(':'); colon != std::string::npos) {
        host = item.substr(0, colon);
        port = item.substr(colon + 1);
        if (host.find(':') != std::string::npos) return bad("write an IPv6 address in brackets, [" + host + "]");
      }
      if (host.empty()) return bad("an empty host in '" + authority + "'");
      if (!port.empty() || item.back() == ':') {
        char* end = nullptr;
        long n = strtol(port.c_str(), &end, 10);
        if (port.empty() || *end != '\0' || n <= 0 || n > 65535) return bad("bad port '" + port + "'");
      }
      hosts.emplace_back(host, port);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  p.user = PercentDecode(url.user);
  p.database = PercentDecode(url.path);
  if (p.database.find('/') != std::string::npos) {
    return Status::Err(EINVAL, "malformed metadata URL '" + p.redacted + "': " + kForm);
  }
  ASSIGN_OR_RETURN(std::string password,
                   ResolveSecret(PercentDecode(url.password), kMetaPasswordEnv));

  std::set<std::string> given;
  auto add = [&](const std::string& key, const std::string& value) {
    p.keywords.push_back(key);
    p.values.push_back(value);
    given.insert(key);
  };
  // Several hosts go to libpq as its own lists, host=h1,h2 port=p1,p2 (5432 where none is
  // given): libpq tries them in order until one takes the connection.
  std::string host_list, port_list;
  for (const auto& [h, port] : hosts) {
    host_list += (host_list.empty() ? "" : ",") + h;
    port_list += (port_list.empty() ? "" : ",") + (port.empty() && hosts.size() > 1 ? "5432" : port);
  }
  if (!host_list.empty()) add("host", host_list);
  if (port_list.find_first_not_of(',') != std::string::npos) add("port", port_list);
  if (!p.database.empty()) add("dbname", p.database);
  if (!p.user.empty()) add("user", p.user);
  if (!password.empty()) add("password", password);

  std::string query_host, query_port, query_db;
  bool has_app_name = false, has_session_attrs = false, has_user_timeout = false;
  std::chrono::milliseconds io_timeout{0};
  for (const auto& [raw_key, raw_value] : url.query) {
    std::string key = PercentDecode(raw_key), value = PercentDecode(raw_value);
    if (key == "timeout") {
      ASSIGN_OR_RETURN(p.timeout, ParseTimeout(value));
      continue;
    }
    if (key == "io-timeout") {
      ASSIGN_OR_RETURN(io_timeout, ParseTimeout(value));
      continue;
    }
    if (key == "tcp_user_timeout") has_user_timeout = true;
    if (given.count(key) != 0) {
      return Status::Err(EINVAL, "metadata URL '" + p.redacted + "' gives '" + key +
                                     "' twice (in the URL and as a query parameter): keep one");
    }
    if (key == "host") query_host = value;
    if (key == "port") query_port = value;
    if (key == "dbname") query_db = value;
    if (key == "application_name") has_app_name = true;
    if (key == "target_session_attrs") has_session_attrs = true;
    add(key, value);
  }
  p.io_timeout = io_timeout.count() > 0
                     ? io_timeout
                     : std::clamp<std::chrono::milliseconds>(p.timeout / 3, std::chrono::seconds(2),
                                                             std::chrono::seconds(10));
  p.io_timeout = std::min(p.io_timeout, p.timeout);
  if (!has_user_timeout) add("tcp_user_timeout", std::to_string(p.io_timeout.count()));
  // Names the connections in pg_stat_activity, so an administrator can tell them apart.
  if (!has_app_name) add("application_name", "tierfs");
  // With several hosts some are standbys: only the one that takes writes will do.
  if (hosts.size() > 1 && !has_session_attrs) add("target_session_attrs", "read-write");

  if (hosts.empty()) {
    std::string host = query_host.empty() ? "localhost" : query_host;
    std::string port = query_port.empty() ? "5432" : query_port;
    p.where = host + ":" + port;
  }
  for (const auto& [h, port] : hosts) {
    std::string shown = h.find(':') != std::string::npos ? "[" + h + "]" : h;
    std::string shown_port = !port.empty() ? port : !query_port.empty() ? query_port : "5432";
    p.where += (p.where.empty() ? "" : ",") + shown + ":" + shown_port;
  }
  if (p.database.empty()) p.database = query_db;
  if (p.database.empty()) p.database = p.user.empty() ? "(default)" : p.user;
  return p;
}

}  // namespace tierfs::pg
