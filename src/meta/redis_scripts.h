// The Lua scripts of the Redis metadata engine. Scripts run atomically on the server, so a
// scan batch (index range plus values) and a commit (data, indexes, versions) are each one
// consistent step and one round trip. Redis key names are explained in redis_engine.h.
//
// Scripts take no KEYS (the engine runs on one standalone server and database) and compare
// no strings in Lua: Lua compares with strcoll, which depends on the server's locale; all
// ordering comes from ZRANGEBYLEX, which compares bytes.
#pragma once

namespace tierfs::redis {

// ARGV: marker, marker_ttl_ms, channel, nput, ndel, nput x (key, group_len, value),
// ndel x (key, group_len). Returns 1 when applied, 0 when the marker already existed
// (the commit was declared lost by a resolver and must not apply).
// An applied commit is published on `channel` (redis_watch.h) as the marker, a newline,
// then each key written or deleted as its decimal length, ':' and the key. pcall: a user
// whom ACLs deny the channel still commits (its mounts then cannot watch, and say so).
inline constexpr char kCommitScript[] = R"lua(
if not redis.call('SET', ARGV[1], '1', 'NX', 'PX', ARGV[2]) then return 0 end
local np, nd = tonumber(ARGV[4]), tonumber(ARGV[5])
local touched = {}
local pub = {ARGV[1], '\n'}
local i = 6
for _ = 1, np do
  local k = ARGV[i]
  local g = string.sub(k, 1, tonumber(ARGV[i + 1]))
  redis.call('SET', 'k' .. k, ARGV[i + 2])
  if redis.call('ZADD', 'i' .. g, 0, k) == 1 then redis.call('ZADD', 'G', 0, g) end
  touched[g] = true
  pub[#pub + 1] = #k .. ':' .. k
  i = i + 3
end
for _ = 1, nd do
  local k = ARGV[i]
  local g = string.sub(k, 1, tonumber(ARGV[i + 1]))
  local gone = redis.call('DEL', 'k' .. k)
  -- The index entry goes even when the value was already gone (damage: see the scans).
  if redis.call('ZREM', 'i' .. g, k) == 1 or gone == 1 then touched[g] = true end
  pub[#pub + 1] = #k .. ':' .. k
  i = i + 2
end
for g in pairs(touched) do
  if redis.call('EXISTS', 'i' .. g) == 1 then
    redis.call('INCR', 'v' .. g)
  else
    redis.call('ZREM', 'G', g)
    redis.call('DEL', 'v' .. g)
  end
end
redis.call('INCR', 'W')
redis.pcall('PUBLISH', ARGV[3], table.concat(pub))
return 1
)lua";

// Scans return every indexed key. A key whose value is missing (deleted or evicted behind
// the engine's back) or not a string (overwritten by hand with another type) is damaged:
// it comes back with an empty value, which no record that carries data decodes, so that
// the layers above report it (and fsck --repair can delete it) instead of a scan failing
// as a whole or the key silently vanishing.
//
// The index walk every scan script shares (prepended to each): up to n keys of group g
// from `from` (inclusive) to hi (a ZRANGEBYLEX bound), as {count, last_key, {k1, v1, ...}}.
#define TIERFS_REDIS_SCAN_GROUP_FN \
  "local function scan_group(g, from, hi, n)\n" \
  "  local ks = redis.call('ZRANGEBYLEX', 'i' .. g, '[' .. from, hi, 'LIMIT', 0, n)\n" \
  "  local kv = {}\n" \
  "  for _, k in ipairs(ks) do\n" \
  "    local v = redis.pcall('GET', 'k' .. k)\n" \
  "    if type(v) ~= 'string' then v = '' end\n" \
  "    kv[#kv + 1] = k; kv[#kv + 1] = v\n" \
  "  end\n" \
  "  return {#ks, ks[#ks] or '', kv}\n" \
  "end\n"

// ARGV: group, from, to, bounded ('1' when `to` limits the range), n. Returns
// {count, last_key, {k1, v1, k2, v2, ...}}: up to n keys of the group in [from, to) with
// their values; count is how many index entries were read (fewer than n: the range is
// done) and last_key the last of them.
inline constexpr char kScanGroupScript[] = TIERFS_REDIS_SCAN_GROUP_FN R"lua(
local hi = ARGV[4] == '1' and ('(' .. ARGV[3]) or '+'
return scan_group(ARGV[1], ARGV[2], hi, tonumber(ARGV[5]))
)lua";

// A scan across groups. ARGV: from, to, bounded, n, max_group_len. Visits the groups that
// are proper prefixes of `from` (a short group may hold keys above `from`), then the groups
// in [from, to) in order, each for up to the keys still wanted, until n keys were read.
// Returns {next_group, has_next, {{group, truncated, last_key, {k1, v1, ...}}, ...}}:
// has_next = 1 when groups from next_group on were not visited; truncated = 1 when the
// group may hold more keys in range after last_key. The caller merges the groups' lists
// (they interleave only when one group is a prefix of another).
inline constexpr char kScanMultiScript[] = TIERFS_REDIS_SCAN_GROUP_FN R"lua(
local from, n = ARGV[1], tonumber(ARGV[4])
local hi = ARGV[3] == '1' and ('(' .. ARGV[2]) or '+'
local out = {}
local total = 0
local function take(g, want)
  local r = scan_group(g, from, hi, want)
  out[#out + 1] = {g, (r[1] >= want) and 1 or 0, r[2], r[3]}
  total = total + r[1]
end
for len = 0, math.min(#from - 1, tonumber(ARGV[5])) do
  local p = string.sub(from, 1, len)
  if redis.call('ZSCORE', 'G', p) then take(p, n) end
end
local next_group = nil
local lo = '[' .. from
local taken = 0
while next_group == nil do
  local gs = redis.call('ZRANGEBYLEX', 'G', lo, hi, 'LIMIT', 0, 128)
  if #gs == 0 then break end
  for _, g in ipairs(gs) do
    if taken > 0 and total >= n then next_group = g; break end
    take(g, math.max(n - total, 1))
    taken = taken + 1
  end
  lo = '(' .. gs[#gs]
end
if next_group == nil then return {'', 0, out} end
return {next_group, 1, out}
)lua";

// RedisTxn::Prefetch in one atomic step. ARGV: nkeys, nscans, batch, the keys (without
// "k"), then per scan: group, from, to (exclusive; the scans are bounded). Returns the
// keys' values (false when missing), then per scan {count, last_key, {k1, v1, ...}} as
// kScanGroupScript does with n = batch.
inline constexpr char kPrefetchScript[] = TIERFS_REDIS_SCAN_GROUP_FN R"lua(
local nk, ns, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 4, 3 + nk do out[#out + 1] = redis.call('GET', 'k' .. ARGV[i]) end
local a = 4 + nk
for _ = 1, ns do
  out[#out + 1] = scan_group(ARGV[a], ARGV[a + 1], '(' .. ARGV[a + 2], n)
  a = a + 3
end
return out
)lua";

// ARGV: marker, ttl_ms. Decides the fate of a commit whose EXEC reply was lost: returns 1
// when it applied; otherwise plants the marker as "lost" so that the commit can never apply
// later (its EXEC may still sit in a dead connection's buffer) and returns 0. A marker found
// gets its expiry renewed: a write, so that a WAIT on the resolving connection (Sentinel
// URLs with wait-replicas) waits for the replicas to hold everything up to it, the commit
// included.
inline constexpr char kResolveScript[] = R"lua(
local v = redis.call('GET', ARGV[1])
if v then
  redis.call('PEXPIRE', ARGV[1], ARGV[2])
  return tonumber(v)
end
redis.call('SET', ARGV[1], '0', 'PX', ARGV[2])
return 0
)lua";

// KvTxn::GetIndirect in one atomic step. ARGV: n, indirect prefix, indirect suffix, then
// the direct keys (already prefixed with "k"). Returns the direct values then the
// indirect one, false for a missing key.
inline constexpr char kGetIndirectScript[] = R"lua(
local n = tonumber(ARGV[1])
local out = {}
for i = 4, #ARGV do out[#out + 1] = redis.call('GET', ARGV[i]) end
local last = out[#out]
if last and #last >= n then
  out[#out + 1] = redis.call('GET', 'k' .. ARGV[2] .. string.sub(last, 1, n) .. ARGV[3])
else
  out[#out + 1] = false
end
return out
)lua";

}  // namespace tierfs::redis
