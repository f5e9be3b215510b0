// Turns a postgres:// META-URL into libpq connection parameters.
//
// postgres://USER:PASSWORD@HOST:PORT/DB?k=v&...  (also postgresql://). User, password and
// database are percent-decoded, as libpq does for its own URIs. The password comes from the
// URL, else from $TIERFS_META_PASSWORD or the file named by $TIERFS_META_PASSWORD_FILE
// (common/secret.h), else libpq's own sources (~/.pgpass, $PGPASSWORD). Query parameters
// are passed to libpq unchanged (sslmode, sslrootcert, application_name, options, ...),
// except `timeout`, which is ours: how long a transaction keeps retrying conflicts and
// reconnecting ("30", "30s", "500ms"; default 30 s), and `io-timeout`: how long one
// exchange with a server may wait before the connection counts as lost and a new one is
// tried (default a third of timeout, 2 s to 10 s). A server that vanishes without closing
// its connections (a machine's power, a network partition: packets dropped) thus costs
// one io-timeout, not the whole timeout: a Patroni test lost its primary's link and every
// operation failed after waiting 20 s on the dead connection while the standby had long
// taken over. The same bound reaches libpq as tcp_user_timeout, so connecting to a host
// that does not answer moves on to the next listed one.
//
// High availability: postgres://USER:PASSWORD@H1:5432,H2,[::1]:5433/DB names several
// servers (a primary and its standbys, say under Patroni). They reach libpq as its own
// lists, host=H1,H2,::1 port=5432,5432,5433 (5432 where none is given), and libpq tries
// them in order whenever a connection is opened, so a client finds the new primary after a
// failover by reconnecting. With several hosts, target_session_attrs defaults to read-write
// (libpq then skips standbys and read-only servers), so a client never settles on a
// standby; give target_session_attrs yourself to override it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/url.h"

namespace tierfs::pg {

struct Params {
  // Parallel keyword/value lists for PQconnectStartParams (without the terminating null).
  std::vector<std::string> keywords;
  std::vector<std::string> values;
  // "HOST:PORT" (several: "H1:P1,H2:P2") and the database name, for messages.
  std::string where;
  std::string database;
  std::string user;
  std::chrono::milliseconds timeout{30000};
  std::chrono::milliseconds io_timeout{10000};
  // The URL with every secret replaced by "****".
  std::string redacted;
};

// Fails with EINVAL on a malformed URL or timeout, or with the error of an unreadable
// password file.
Result<Params> ParamsFromUrl(const Url& url);

// "%41b" -> "Ab"; malformed escapes are kept verbatim.
std::string PercentDecode(const std::string& s);

// Parses "30", "2.5", "30s" or "500ms" into a positive duration.
Result<std::chrono::milliseconds> ParseTimeout(const std::string& text);

}  // namespace tierfs::pg
