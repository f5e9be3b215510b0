// META-URL parsing for the etcd metadata engine:
//   etcd://[USER:PASSWORD@]HOST1[:PORT],HOST2[:PORT],.../PREFIX
//       [?timeout=30s&request-timeout=3s&max-txn-ops=128&api=grpc|json]
//   etcds://...same...[&ca=CA.pem&cert=CLIENT.pem&key=CLIENT-KEY.pem]   (TLS)
// With etcds:// every member is spoken to over TLS and its certificate checked against
// ca= (else the system's CAs); cert= and key= present a client certificate (a cluster
// started with --client-cert-auth). The files are read at open: one that cannot be read is
// reported then (ENOENT, EACCES).
// HOSTs: some or all members of the cluster (port 2379 when left out). PREFIX: the volume's
// keys live under "PREFIX/", so that one cluster holds several volumes beside other users'
// keys (Patroni's, for example); it is required.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "common/status.h"
#include "common/url.h"
#include "meta/etcd_client.h"

namespace tierfs::etcd {

struct Options {
  ClientOptions client;
  std::string prefix;  // "PREFIX/"
  // How long a transaction keeps retrying conflicts and an unavailable cluster (no
  // member answers, no leader: an election takes about a second) before it fails with EIO.
  std::chrono::milliseconds deadline{30000};
  // The cluster's --max-txn-ops (128 by default): a transaction that read more keys than
  // this compares one revision for all it read instead of one per key (etcd_txn.h).
  size_t max_txn_ops = 128;
  std::string describe;
};

// The password comes from the URL, else $TIERFS_META_PASSWORD or the file named by
// $TIERFS_META_PASSWORD_FILE. Errors are EINVAL with the expected form (never the
// password).
Result<Options> ParseOptions(const Url& url);

}  // namespace tierfs::etcd
