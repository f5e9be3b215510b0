// Asking Redis Sentinels where a master is, for the Redis engine's Sentinel URLs
// (redis_options.h).
//
// Every Sentinel is dialled at once, each on a thread of its own, and the first answer
// wins: a Sentinel that is down, or hung without refusing the connection, never delays a
// mount while another one answers (JuiceFS's client asks them one after another, so a
// dead first Sentinel costs every mount its connect timeout). Threads still waiting on a
// hung Sentinel are detached and end at their own timeout; they hold only shared state.
//
// An answer is only a hint: the engine checks with ROLE that the server it names is a
// master before using it (redis_conn.h, ConnParams::require_master), because a Sentinel cut
// off from the others can name a master that has since been demoted.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tierfs::redis {

struct MasterAddr {
  std::string host;
  int port = 0;
};

// Errors: EINVAL when the Sentinels that answered do not monitor a master of that name;
// ECONNREFUSED when every Sentinel refused the connection; EHOSTUNREACH (or the first
// failure's code) when none answered in time. Messages name every Sentinel and why.
Result<MasterAddr> AskSentinels(const std::string& master_name,
                                const std::vector<std::pair<std::string, int>>& sentinels,
                                std::chrono::milliseconds timeout);

}  // namespace tierfs::redis
